// model_flags(): --device / --dtype to model::ModelOptions.
#include "cli/device_flags.h"

#include "base/dtype.h"
#include "job/gpu_paths.h"

namespace moerl::cli {

model::ModelOptions model_flags(Args& args, const std::string& command) {
  const std::string device = args.value("--device").value_or("cpu");
  const std::string dtype = args.value("--dtype").value_or("float32");
  model::ModelOptions o;
  o.dtype = parse_dtype(dtype, "--dtype", {DType::kFloat32, DType::kBFloat16}) == DType::kBFloat16 ? at::kBFloat16
                                                                                                    : at::kFloat;
  o.device = job::open_device(device, command + ": --device");
  return o;
}

}  // namespace moerl::cli
