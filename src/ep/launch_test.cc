// `moerl launch` as the EP tests use it: environment per rank, [rank i] prefixes, and
// fail-fast when one rank exits non-zero. Needs MOERL_BIN (set by ctest).
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/subprocess.h"

namespace {

// `cmd` through the shell, stdout and stderr together; killed after 180 s.
std::string run(const std::string& cmd, int* status) {
  moerl::CapturedRun r = moerl::run_captured({"/bin/sh", "-c", cmd}, moerl::Deadline::after_seconds(180));
  *status = r.status;
  return r.output;
}

TEST(Launch, SetsRankEnvironmentAndPrefixesLines) {
  const char* bin = std::getenv("MOERL_BIN");
  if (!bin) GTEST_SKIP() << "MOERL_BIN not set (run through ctest)";
  int st = 0;
  std::string out = run(std::string(bin) + " launch -n 3 -- sh -c 'echo r=$RANK w=$WORLD_SIZE l=$LOCAL_RANK a=$MASTER_ADDR'", &st);
  EXPECT_EQ(st, 0) << out;
  for (int r = 0; r < 3; ++r) {
    std::string line = "[rank " + std::to_string(r) + "] r=" + std::to_string(r) + " w=3 l=" + std::to_string(r) + " a=127.0.0.1";
    EXPECT_NE(out.find(line), std::string::npos) << out;
  }
}

TEST(Launch, FailsFastWhenOneRankDies) {
  const char* bin = std::getenv("MOERL_BIN");
  if (!bin) GTEST_SKIP() << "MOERL_BIN not set (run through ctest)";
  int st = 0;
  auto t0 = std::chrono::steady_clock::now();
  std::string out = run(std::string(bin) + " launch -n 2 -- sh -c 'if [ $RANK = 1 ]; then exit 7; fi; exec sleep 60'", &st);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(st, 7) << out;
  EXPECT_LT(took, 20) << "the surviving rank was not stopped";
  EXPECT_NE(out.find("rank 1 exited with status 7"), std::string::npos) << out;
}

}  // namespace
