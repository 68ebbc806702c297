// `moerl forward`: logits of a checkpoint for a batch of token ids (parity checks, debugging).
//   moerl forward --model DIR --input IN.safetensors --output OUT.safetensors
//                 [--device cpu|cuda[:N]] [--dtype float32|bfloat16]
// IN holds int64 `input_ids` [B,T]; OUT gets float32 `logits` [B,T,V] (whatever --dtype).
#include <c10/core/InferenceMode.h>

#include "base/error.h"
#include "cli/command.h"
#include "cli/device_flags.h"
#include "io/tensor_io.h"
#include "model/model.h"

namespace moerl::cli {

namespace {
at::Tensor read_input_ids(const std::string& path) {
  auto tensors = io::load_tensors(path);
  auto it = tensors.find("input_ids");
  if (it == tensors.end()) {
    throw Error(path + " has no tensor named input_ids", "write the token ids as int64 `input_ids` [B,T]");
  }
  if (it->second.dim() != 2 || it->second.scalar_type() != at::kLong) {
    throw Error(path + ": input_ids has dtype " + std::string(c10::toString(it->second.scalar_type())) +
                    " and shape " + std::string(c10::str(it->second.sizes())) + "; expected int64 [B,T]",
                "write the token ids as int64 `input_ids` [B,T]");
  }
  return it->second;
}
}  // namespace

at::Tensor read_input_ids_file(const std::string& path) { return read_input_ids(path); }

static int run_forward(Args& args) {
  const std::string model_dir = args.required("--model");
  const std::string input = args.required("--input");
  const std::string output = args.required("--output");
  const model::ModelOptions mo = model_flags(args, "forward");
  args.finish();
  at::Tensor ids = read_input_ids(input);
  model::Model m = model::load_model(model_dir, mo);
  c10::InferenceMode guard;
  model::ForwardInput in;
  in.input_ids = ids.to(m.device());
  at::Tensor logits = m.forward(in).logits_BTV.to(at::kCPU, at::kFloat).contiguous();
  io::save_tensors(output, {{"logits", logits}});
  return 0;
}

MOERL_COMMAND("forward", "logits of a model for token ids (safetensors in, safetensors out)", run_forward);

}  // namespace moerl::cli
