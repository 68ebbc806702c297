// The fabric backend over libfabric's shm provider: a region file that a killed process left
// in /dev/shm under this process's pid (pids are reused) does not stop a new endpoint. Before,
// the provider's default region name "<pid>:0:0" collided and fi_enable failed with "Device
// or resource busy" (a fresh-clone `make test` hit it in EpConformance).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ep/transport/fabric.h"

namespace moerl::ep {
namespace {

TEST(FabricShmName, AStaleRegionUnderThisPidDoesNotBlockANewEndpoint) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  const std::string stale = "/dev/shm/" + std::to_string(::getpid()) + ":0:0";
  // A killed process of an earlier run may really have left one under this pid (a fresh-clone
  // run met /dev/shm/26773:0:0): that is the case itself, so it is used and left as found.
  const bool ours = !std::filesystem::exists(stale);
  if (ours) std::ofstream(stale) << std::string(1 << 20, '\x7f');  // what a killed process leaves
  try {
    FabricEndpoint ep({.provider = "shm", .rank = 0, .world_size = 1, .buffer_bytes = 1 << 20},
                      [](const std::string& mine) { return std::vector<std::string>{mine}; });
  } catch (const std::exception& e) {
    if (ours) std::filesystem::remove(stale);
    FAIL() << e.what();
  }
  if (ours) std::filesystem::remove(stale);
}

}  // namespace
}  // namespace moerl::ep
