// Regions of libfabric's shm provider left by killed processes are removed by the next
// endpoint: the sweep's rules on a scratch directory, and a real endpoint whose process is
// SIGKILLed (a rank of this binary re-executed) leaving its region in /dev/shm.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ep/transport/fabric.h"
#include "ep/transport/shm_regions.h"

namespace moerl::ep {
namespace {

namespace fs = std::filesystem;

void touch(const fs::path& p) { std::ofstream(p) << "region"; }

std::vector<std::string> names_in(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ShmRegions, OnlyRegionsWhoseLockNobodyHoldsAreRemoved) {
  const fs::path dir = fs::temp_directory_path() / ("moerl_shm_sweep_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string d = dir.string();
  touch(dir / "moerl-1-dead");  // a killed process's region and its lock, held by nobody
  touch(dir / "moerl-1-dead.lock");
  touch(dir / "moerl-2-live");
  auto live = std::make_unique<ShmRegionLock>(d, "moerl-2-live");  // a live endpoint's
  touch(dir / "moerl-3-old");   // before lock files existed: owner unknown, kept
  touch(dir / "other-4.lock");  // not ours
  touch(dir / "moerl-5-x.lock-new");  // a lock a killed process left half-made, long ago
  fs::last_write_time(dir / "moerl-5-x.lock-new", fs::file_time_type::clock::now() - std::chrono::minutes(5));
  touch(dir / "moerl-6-y.lock-new");  // one being made right now

  EXPECT_EQ(sweep_stale_regions(d), 1);
  EXPECT_EQ(names_in(dir, ""), (std::vector<std::string>{"moerl-2-live", "moerl-2-live.lock", "moerl-3-old",
                                                         "moerl-6-y.lock-new", "other-4.lock"}));
  live.reset();  // the endpoint closes: its lock goes (its region is the provider's to remove)
  EXPECT_FALSE(fs::exists(dir / "moerl-2-live.lock"));
  EXPECT_EQ(sweep_stale_regions(d), 0);
  EXPECT_TRUE(fs::exists(dir / "moerl-2-live"));  // no lock file: left alone
  fs::remove_all(dir);
}

TEST(ShmRegions, AnUnwritableDirectoryIsNamed) {
  try {
    ShmRegionLock lock("/nonexistent-moerl-dir", "moerl-1-x");
    FAIL() << "made a lock in a missing directory";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-moerl-dir/moerl-1-x.lock"), std::string::npos) << e.what();
  }
}

// The rank side: an shm endpoint, then "ready" on stdout, then wait to be killed.
TEST(ShmRegionsWorker, HoldAnEndpoint) {
  if (!std::getenv("MOERL_SHM_REGIONS_WORKER")) GTEST_SKIP() << "runs as the process ShmRegions.* kills";
  FabricEndpoint ep({.provider = "shm", .rank = 0, .world_size = 1, .buffer_bytes = 1 << 20},
                    [](const std::string& mine) { return std::vector<std::string>{mine}; });
  std::fputs("ready\n", stdout);
  std::fflush(stdout);
  ::pause();
}

TEST(ShmRegions, ASigkilledEndpointsRegionIsRemovedByTheNextEndpoint) {
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::setenv("MOERL_SHM_REGIONS_WORKER", "1", 1);
    ::execl("/proc/self/exe", "moerl_ep_tests", "--gtest_filter=ShmRegionsWorker.*", static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(out[1]);
  std::string got;
  char c;
  while (got.find("ready\n") == std::string::npos && ::read(out[0], &c, 1) == 1) got += c;  // bounded by ctest's timeout
  ::close(out[0]);
  ASSERT_NE(got.find("ready"), std::string::npos) << "the endpoint process did not start: " << got;
  const std::string prefix = "moerl-" + std::to_string(pid) + "-";
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  const std::vector<std::string> left = names_in("/dev/shm", prefix);
  ASSERT_EQ(left.size(), 2u) << "the killed endpoint should leave its region and its lock";
  {
    FabricEndpoint ep({.provider = "shm", .rank = 0, .world_size = 1, .buffer_bytes = 1 << 20},
                      [](const std::string& mine) { return std::vector<std::string>{mine}; });
    EXPECT_TRUE(names_in("/dev/shm", prefix).empty()) << "left: " << names_in("/dev/shm", prefix).size();
  }
  EXPECT_TRUE(names_in("/dev/shm", "moerl-" + std::to_string(::getpid()) + "-").empty())
      << "a closed endpoint left its region or lock";
}

}  // namespace
}  // namespace moerl::ep
