// The dtype spelling table and its parser.
#include "base/dtype.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"

namespace moerl {
namespace {

struct Spelling {
  const char* text;
  DType dtype;
};

// Canonical name first for each type.
constexpr Spelling kSpellings[] = {
    {"float32", DType::kFloat32},  {"fp32", DType::kFloat32}, {"f32", DType::kFloat32},
    {"bfloat16", DType::kBFloat16}, {"bf16", DType::kBFloat16},
    {"float16", DType::kFloat16},  {"fp16", DType::kFloat16}, {"f16", DType::kFloat16}, {"half", DType::kFloat16},
    {"float64", DType::kFloat64},  {"fp64", DType::kFloat64}, {"f64", DType::kFloat64}, {"double", DType::kFloat64},
};

}  // namespace

DType parse_dtype(std::string_view text, std::string_view what, std::initializer_list<DType> supported) {
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  std::string key;
  for (size_t i = b; i < e; ++i) key += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  for (const Spelling& s : kSpellings) {
    if (key != s.text) continue;
    if (supported.size() == 0 || std::find(supported.begin(), supported.end(), s.dtype) != supported.end()) {
      return s.dtype;
    }
    std::string names;
    for (DType d : supported) names += (names.empty() ? "" : ", ") + std::string(dtype_name(d));
    throw Error(std::string(what) + " = \"" + std::string(text) + "\" (" + dtype_name(s.dtype) + ") is not supported here",
                "use one of: " + names + " (short names such as bf16 and fp32 work too)", ErrorCode::kInvalidInput);
  }
  throw Error(std::string(what) + " = \"" + std::string(text) + "\" is not a dtype",
              "accepted (any case): " + accepted_dtype_spellings(), ErrorCode::kInvalidInput);
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
  }
  return "float32";
}

const char* dtype_short_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "fp32";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat16: return "fp16";
    case DType::kFloat64: return "fp64";
  }
  return "fp32";
}

std::string accepted_dtype_spellings() {
  std::string out;
  for (const Spelling& s : kSpellings) out += (out.empty() ? "" : ", ") + std::string(s.text);
  return out;
}

}  // namespace moerl
