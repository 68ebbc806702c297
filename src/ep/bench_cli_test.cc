// `moerl bench ep --dtype`: every common spelling of the two dtypes the benchmark runs
// (base/dtype.h), and an error listing the spellings for anything else. Needs MOERL_BIN.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "base/subprocess.h"

namespace {

moerl::CapturedRun bench(const std::string& dtype) {
  return moerl::run_captured({std::getenv("MOERL_BIN"), "bench", "ep", "--dtype", dtype, "--tokens", "32", "--hidden",
                              "8", "--topk", "2", "--experts", "4", "--warmup", "0", "--iters", "1", "--json"},
                             moerl::Deadline::after_seconds(180));
}

TEST(BenchEpCli, DtypeTakesTheCommonSpellings) {
  if (!std::getenv("MOERL_BIN")) GTEST_SKIP() << "MOERL_BIN not set (run through ctest)";
  for (const auto& [spelling, name] : {std::pair{"f32", "fp32"}, std::pair{"float32", "fp32"},
                                       std::pair{"fp32", "fp32"}, std::pair{"bfloat16", "bf16"}}) {
    moerl::CapturedRun r = bench(spelling);
    ASSERT_EQ(r.status, 0) << "--dtype " << spelling << ":\n" << r.output;
    const std::string json = r.output.substr(r.output.find('{'));
    EXPECT_EQ(nlohmann::json::parse(json.substr(0, json.find('\n')))["dtype"], name) << r.output;
  }
  moerl::CapturedRun bad = bench("fp8");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--dtype = \"fp8\" is not a dtype"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("bf16"), std::string::npos) << bad.output;
  moerl::CapturedRun half = bench("half");
  EXPECT_EQ(half.status, 2) << half.output;
  EXPECT_NE(half.output.find("not supported"), std::string::npos) << half.output;
}

}  // namespace
