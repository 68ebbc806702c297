// Floating-point element types as moerl's flags and config keys spell them: ONE parser for
// every `--dtype` flag and every dtype key ([model] dtype / rollout_dtype, `moerl bench ep
// --dtype`), accepting the common aliases, and one canonical name per type. Torch-free: parts
// that hold tensors map DType to their own scalar types.
//
//   DType d = parse_dtype("bf16", "model.dtype");   // == DType::kBFloat16
//   dtype_name(d);                                   // "bfloat16" (PyTorch / HF config spelling)
//   parse_dtype("f8", "--dtype");  // Error: '--dtype = "f8"' is not a dtype; accepted: ...
//   parse_dtype("fp16", "--dtype", {DType::kBFloat16, DType::kFloat32});  // Error: not supported here
// Pure functions; thread-safe.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace moerl {

enum class DType { kFloat32, kBFloat16, kFloat16, kFloat64 };

// Case-insensitive, surrounding blanks ignored: float32 fp32 f32 | bfloat16 bf16 |
// float16 fp16 f16 half | float64 fp64 f64 double. `what` names the flag or key in the error
// (moerl::Error(kInvalidInput), listing every accepted spelling). A non-empty `supported`
// limits the types the caller can use: another (well-spelled) type is an error listing them.
DType parse_dtype(std::string_view text, std::string_view what, std::initializer_list<DType> supported = {});
// "float32", "bfloat16", "float16", "float64".
const char* dtype_name(DType dtype);
// Short name: "fp32", "bf16", "fp16", "fp64".
const char* dtype_short_name(DType dtype);
// Every accepted spelling, canonical names first ("float32, fp32, f32, bfloat16, bf16, ...").
std::string accepted_dtype_spellings();

}  // namespace moerl
