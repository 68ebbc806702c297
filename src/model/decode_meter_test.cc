// DecodeMeter: an interval's line gives the steps, the mean busy rows (tokens / steps), the
// token rate and each phase's share of the time, from a scripted clock; the next interval
// counts only what came after. SlotTable::tokens counts every token pushed.
#include "model/decode_meter.h"

#include <gtest/gtest.h>

#include "model/slot_table.h"

namespace moerl::model {
namespace {

TEST(DecodeMeter, AnIntervalLineGivesBusyRowsRateAndPhaseShares) {
  double t = 0;
  DecodeMeter meter(8, /*every_s=*/1e9, [&t] { return t; });
  EXPECT_EQ(meter.take_line(), "") << "no step yet";
  // Seconds in each phase, in order, on the scripted clock; a feed that swapped weights is
  // relabelled once it returns.
  auto spend = [&](double decode, double records, double feed, bool swapped, double admit) {
    meter.enter(DecodePhase::kDecode);
    t += decode;
    meter.enter(DecodePhase::kRecords);
    t += records;
    meter.enter(DecodePhase::kLeases);
    t += feed;
    if (swapped) meter.relabel(DecodePhase::kSwap);
    meter.enter(DecodePhase::kAdmit);
    t += admit;
  };
  spend(6, 1, 1, false, 2);
  meter.count(5, 20);
  EXPECT_EQ(meter.take_line(),
            "decode: 5 steps in 10.0 s, rows busy 4.0 of 8 (50%), 2 tokens/s; "
            "time: decode 60%, records 10%, leases 10%, swap 0%, admit 20%");
  spend(4, 0, 3, true, 1);  // the next interval: only its own steps, tokens and time
  spend(1, 0, 1, false, 0);
  meter.count(15, 100);
  EXPECT_EQ(meter.take_line(),
            "decode: 10 steps in 10.0 s, rows busy 8.0 of 8 (100%), 8 tokens/s; "
            "time: decode 50%, records 0%, leases 10%, swap 30%, admit 10%");
  EXPECT_EQ(meter.take_line(), "") << "no step since the last line";
}

TEST(DecodeMeter, SlotTableCountsEveryTokenPushed) {
  GenerateConfig g;
  g.max_new_tokens = 2;
  SlotTable table(3, 2, g);
  ASSERT_EQ(table.admit(), (std::vector<int64_t>{0, 1}));
  table.push(0, 5, 0.f, 0.f);
  table.push(1, 6, 0.f, 0.f);
  EXPECT_EQ(table.push(0, 7, 0.f, 0.f), 0) << "its cap of 2 ends sequence 0";
  ASSERT_EQ(table.admit(), (std::vector<int64_t>{0}));
  table.push(0, 8, 0.f, 0.f);
  EXPECT_EQ(table.tokens(), 4);
}

}  // namespace
}  // namespace moerl::model
