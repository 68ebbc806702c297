#include "base/check.h"

#include <gtest/gtest.h>

#include "base/deadline.h"

namespace moerl {
namespace {

TEST(Check, FailureNamesValues) {
  try {
    int a = 3, b = 4;
    MOERL_CHECK_EQ(a, b) << "context";
    FAIL();
  } catch (const Error& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("[3 vs 4]"), std::string::npos) << w;
    EXPECT_NE(w.find("context"), std::string::npos) << w;
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
  MOERL_CHECK(true);
}

TEST(Deadline, WaitTimesOutWithDescription) {
  try {
    wait_until([] { return false; }, Deadline::after_seconds(0.05), [] { return std::string("rank 0 waiting for peer 1"); });
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("peer 1"), std::string::npos);
  }
  int n = 0;
  wait_until([&] { return ++n > 3; }, Deadline::after_seconds(5), [] { return std::string(); });
  EXPECT_EQ(n, 4);
}

}  // namespace
}  // namespace moerl
