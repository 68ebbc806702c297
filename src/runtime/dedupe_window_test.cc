// DedupeWindow: keys refused once taken, forgotten below the settled watermark, whose late
// copies are still refused; a restored window behaves as the saved one.
#include "runtime/dedupe_window.h"

#include <gtest/gtest.h>

namespace moerl::runtime {
namespace {

TEST(DedupeWindow, RefusesARepeatedKey) {
  DedupeWindow w;
  EXPECT_TRUE(w.admit("c3#0", 3));
  EXPECT_FALSE(w.admit("c3#0", 3));
  EXPECT_TRUE(w.admit("c3#1", 3)) << "another attempt of an unsettled task is its own record";
  EXPECT_EQ(w.size(), 2u);
}

TEST(DedupeWindow, ForgetsSettledKeysAndStillRefusesTheirCopies) {
  DedupeWindow w;
  for (uint64_t c = 0; c < 10; ++c) ASSERT_TRUE(w.admit("c" + std::to_string(c) + "#0", c));
  w.settle_below(8);
  EXPECT_EQ(w.size(), 2u) << "keys of tasks 0..7 are forgotten";
  EXPECT_FALSE(w.admit("c5#0", 5)) << "a late copy of a settled task";
  EXPECT_FALSE(w.admit("c5#3", 5)) << "any attempt of a settled task";
  EXPECT_TRUE(w.taken("c5#0", 5));
  EXPECT_FALSE(w.admit("c9#0", 9));
  EXPECT_TRUE(w.admit("c10#0", 10));
  w.settle_below(4);
  EXPECT_EQ(w.settled_below(), 8u) << "the watermark never goes back";
}

TEST(DedupeWindow, ReserveHoldsAKeyWithoutHandingItOut) {
  DedupeWindow w;
  w.reserve("c2#0", 2);
  EXPECT_FALSE(w.admit("c2#0", 2));
  EXPECT_TRUE(w.admit("c2#1", 2));
  w.settle_below(5);
  w.reserve("c1#1", 1);
  EXPECT_EQ(w.size(), 0u) << "a settled task needs no reservation";
}

TEST(DedupeWindow, RestoreDropsKeysBelowTheSavedWatermark) {
  DedupeWindow w;
  w.restore({{"c1#0", 1}, {"c6#0", 6}, {"c7#2", 7}}, 5);
  EXPECT_EQ(w.settled_below(), 5u);
  EXPECT_EQ(w.size(), 2u);
  EXPECT_FALSE(w.admit("c6#0", 6));
  EXPECT_FALSE(w.admit("c1#0", 1));
  EXPECT_TRUE(w.admit("c6#1", 6));
}

}  // namespace
}  // namespace moerl::runtime
