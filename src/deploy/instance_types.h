// EC2 instance types moerl can deploy onto, with the public AWS facts the renderer needs
// (vCPUs, memory, GPUs, EFA interfaces). The table is code: add a row to support a type.
//
//   const InstanceType* t = find_instance_type("p5en.48xlarge");  // nullptr if unknown
//   if (t && t->efa_interfaces > 0) ...
// Immutable; safe from any thread.
#pragma once

#include <string>
#include <vector>

namespace moerl::deploy {

struct InstanceType {
  const char* name;
  int vcpus;
  int memory_gib;
  int gpus;             // NVIDIA GPUs (0 for CPU types)
  const char* gpu;      // GPU model, "" for CPU types
  int gpu_memory_gib;   // per GPU
  int efa_interfaces;   // max EFA devices (0 = EFA not supported)
};

const InstanceType* find_instance_type(const std::string& name);
const std::vector<InstanceType>& instance_types();
// "p5en.48xlarge, p5.48xlarge, ..." of a kind, for error hints.
std::string instance_type_names(bool gpu_only);

}  // namespace moerl::deploy
