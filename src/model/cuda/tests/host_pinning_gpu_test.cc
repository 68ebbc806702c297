// Page-locked shared-memory versions: in /dev/shm (tmpfs) a GPU policy's version goes into the
// writer's mapped file by DMA (pinned), reads back equal, and a second version of the same slot
// reuses the pinned mapping. A file on a disk filesystem cannot be registered: the copies fall
// back to pageable memory and still read back equal.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <unistd.h>

#include <filesystem>

#include "base/files.h"
#include "model/cuda/host_pinning_cuda.h"
#include "model/test_util.h"
#include "rollout/shared_weights.h"

namespace moerl::rollout {
namespace {

TEST(HostPinningGpu, SharedWeightsOfAGpuPolicyArePinnedAndReadBackEqual) {
  model::cuda::install_host_pinning();  // what job::enable_gpu_paths installs
  const std::string shm = "/dev/shm/moerl-pinned-test-" + std::to_string(::getpid());
  std::filesystem::create_directories(shm);
  ScratchDir disk("pinned-shared-weights");
  model::ModelOptions o;
  o.device = at::Device(at::kCUDA);
  o.dtype = at::kBFloat16;
  model::Model m = model::init_random(model::testing::tiny_qwen3(), 3, o);
  for (const std::string& dir : {shm, disk.path()}) {
    SharedWeightsWriter w(dir, "gpu");
    for (uint64_t v : {uint64_t{1}, uint64_t{2}, uint64_t{3}}) {  // v3 reuses slot 1's pinned mapping
      for (auto& [name, t] : m.params()) t.detach().add_(0.5);        // a new version each time
      const std::string loc = w.put(v, m);
      if (dir == shm) EXPECT_TRUE(w.pinned()) << "version " << v << " was copied through pageable memory";
      SharedWeights s = read_shared_weights(loc);
      EXPECT_EQ(s.version, v);
      for (const auto& [name, t] : m.state()) {
        ASSERT_TRUE(s.params.count(name)) << name;
        EXPECT_TRUE(at::equal(s.params.at(name), t.cpu())) << name << " of version " << v << " in " << dir;
      }
    }
  }
  std::filesystem::remove_all(shm);
}

}  // namespace
}  // namespace moerl::rollout
