// The instance-type table. Figures are AWS's published specifications (EC2 instance type
// pages, "Accelerated computing" and the EFA supported-instances list).
#include "deploy/instance_types.h"

namespace moerl::deploy {

const std::vector<InstanceType>& instance_types() {
  static const std::vector<InstanceType> kTypes = {
      // name                vCPU  GiB  GPUs  model   GiB/GPU EFA
      {"p6-b200.48xlarge", 192, 2048, 8, "B200", 179, 8},
      {"p5en.48xlarge", 192, 2048, 8, "H200", 141, 16},
      {"p5e.48xlarge", 192, 2048, 8, "H200", 141, 32},
      {"p5.48xlarge", 192, 2048, 8, "H100", 80, 32},
      {"p4de.24xlarge", 96, 1152, 8, "A100", 80, 4},
      {"p4d.24xlarge", 96, 1152, 8, "A100", 40, 4},
      {"g6e.xlarge", 4, 32, 1, "L40S", 48, 0},
      {"g6e.2xlarge", 8, 64, 1, "L40S", 48, 0},
      {"g6e.4xlarge", 16, 128, 1, "L40S", 48, 0},
      {"g6e.8xlarge", 32, 256, 1, "L40S", 48, 1},
      {"g6e.12xlarge", 48, 384, 4, "L40S", 48, 1},
      {"g6e.16xlarge", 64, 512, 1, "L40S", 48, 1},
      {"g6e.24xlarge", 96, 768, 4, "L40S", 48, 2},
      {"g6e.48xlarge", 192, 1536, 8, "L40S", 48, 4},
      {"g6.xlarge", 4, 16, 1, "L4", 24, 0},
      {"g6.2xlarge", 8, 32, 1, "L4", 24, 0},
      {"g6.4xlarge", 16, 64, 1, "L4", 24, 0},
      {"g6.8xlarge", 32, 128, 1, "L4", 24, 1},
      {"g6.12xlarge", 48, 192, 4, "L4", 24, 1},
      {"g6.16xlarge", 64, 256, 1, "L4", 24, 1},
      {"g6.24xlarge", 96, 384, 4, "L4", 24, 1},
      {"g6.48xlarge", 192, 768, 8, "L4", 24, 1},
      {"g5.xlarge", 4, 16, 1, "A10G", 24, 0},
      {"g5.2xlarge", 8, 32, 1, "A10G", 24, 0},
      {"g5.4xlarge", 16, 64, 1, "A10G", 24, 0},
      {"g5.8xlarge", 32, 128, 1, "A10G", 24, 1},
      {"g5.12xlarge", 48, 192, 4, "A10G", 24, 1},
      {"g5.16xlarge", 64, 256, 1, "A10G", 24, 1},
      {"g5.24xlarge", 96, 384, 4, "A10G", 24, 1},
      {"g5.48xlarge", 192, 768, 8, "A10G", 24, 1},
      // CPU: compute (c), general purpose (m), memory optimised (r).
      {"c7i.2xlarge", 8, 16, 0, "", 0, 0},
      {"c7i.4xlarge", 16, 32, 0, "", 0, 0},
      {"c7i.8xlarge", 32, 64, 0, "", 0, 0},
      {"c7i.16xlarge", 64, 128, 0, "", 0, 0},
      {"c7i.48xlarge", 192, 384, 0, "", 0, 1},
      {"c6i.2xlarge", 8, 16, 0, "", 0, 0},
      {"c6i.4xlarge", 16, 32, 0, "", 0, 0},
      {"c6i.8xlarge", 32, 64, 0, "", 0, 0},
      {"c5n.18xlarge", 72, 192, 0, "", 0, 1},
      {"m7i.large", 2, 8, 0, "", 0, 0},
      {"m7i.xlarge", 4, 16, 0, "", 0, 0},
      {"m7i.2xlarge", 8, 32, 0, "", 0, 0},
      {"m7i.4xlarge", 16, 64, 0, "", 0, 0},
      {"m7i.8xlarge", 32, 128, 0, "", 0, 0},
      {"m6i.xlarge", 4, 16, 0, "", 0, 0},
      {"m6i.2xlarge", 8, 32, 0, "", 0, 0},
      {"m6i.4xlarge", 16, 64, 0, "", 0, 0},
      {"m5.xlarge", 4, 16, 0, "", 0, 0},
      {"m5.2xlarge", 8, 32, 0, "", 0, 0},
      {"r7i.xlarge", 4, 32, 0, "", 0, 0},
      {"r7i.2xlarge", 8, 64, 0, "", 0, 0},
      {"r7i.4xlarge", 16, 128, 0, "", 0, 0},
      {"r7i.8xlarge", 32, 256, 0, "", 0, 0},
      {"r7i.16xlarge", 64, 512, 0, "", 0, 0},
      {"r6i.2xlarge", 8, 64, 0, "", 0, 0},
      {"r6i.4xlarge", 16, 128, 0, "", 0, 0},
      {"r6i.8xlarge", 32, 256, 0, "", 0, 0},
  };
  return kTypes;
}

const InstanceType* find_instance_type(const std::string& name) {
  for (const auto& t : instance_types()) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

std::string instance_type_names(bool gpu_only) {
  std::string out;
  for (const auto& t : instance_types()) {
    if (gpu_only && t.gpus == 0) continue;
    out += (out.empty() ? "" : ", ") + std::string(t.name);
  }
  return out;
}

}  // namespace moerl::deploy
