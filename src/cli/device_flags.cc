// model_flags(): --device / --dtype to model::ModelOptions.
#include "cli/device_flags.h"

#include "base/dtype.h"
#include "base/error.h"
#include "job/gpu_paths.h"

namespace moerl::cli {

model::ModelOptions model_flags(Args& args, const std::string& command) {
  const std::string device = args.value("--device").value_or("cpu");
  const std::string dtype = args.value("--dtype").value_or("float32");
  model::ModelOptions o;
  o.dtype = parse_dtype(dtype, "--dtype", {DType::kFloat32, DType::kBFloat16}) == DType::kBFloat16 ? at::kBFloat16
                                                                                                    : at::kFloat;
  if (device == "cpu") return o;
  if (device != "cuda" && device.rfind("cuda:", 0) != 0) {
    throw Error(command + ": --device " + device + " is not a device", "use --device cpu, cuda or cuda:N",
                ErrorCode::kInvalidInput);
  }
  if (!at::hasCUDA()) {
    throw Error(command + ": --device " + device + " but this process sees no CUDA GPU",
                "build with -DMOERL_CUDA=ON against a CUDA libtorch and run on a GPU machine, or use --device cpu",
                ErrorCode::kInvalidInput);
  }
  job::enable_gpu_paths();
  o.device = at::Device(device);
  return o;
}

}  // namespace moerl::cli
