// Tests for the progress display: rate/ETA math, plain-line format and cadence, bar
// redraw throttling, through an injected clock and sink.
#include "base/progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace moerl {
namespace {

struct Harness {
  double t = 100.0;
  std::vector<std::string> out;
  ProgressOptions options(ProgressStyle style) {
    ProgressOptions o;
    o.style = style;
    o.clock = [this] { return t; };
    o.sink = [this](std::string_view s) { out.emplace_back(s); };
    o.columns = 200;
    return o;
  }
};

TEST(Progress, RateIsTimeWeightedWithForgetting) {
  RateEstimator r(10.0);
  r.start(0, 0);
  EXPECT_TRUE(std::isnan(r.rate()));
  r.add(10, 10);  // 1 step/s for 10 s
  EXPECT_DOUBLE_EQ(r.rate(), 1.0);
  r.add(20, 40);  // then 3 steps/s for 10 s; the first interval decays by e^-1
  double w = std::exp(-1.0);
  EXPECT_DOUBLE_EQ(r.rate(), (10 * w + 30) / (10 * w + 10));
  r.add(20, 45);  // no time passed: folded into the next interval
  r.add(21, 48);
  double w1 = std::exp(-0.1);
  EXPECT_NEAR(r.rate(), ((10 * w + 30) * w1 + 8) / ((10 * w + 10) * w1 + 1), 1e-12);
}

TEST(Progress, SteadyRandomRateGivesExactEta) {
  // Steps arrive at a constant rate but at random times: the smoothed rate must be exact.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> gap(0.01, 2.0);
  const double kRate = 3.7;
  Harness h;
  Progress p("train", 1000, h.options(ProgressStyle::kOff));
  double t0 = h.t;
  for (int i = 0; i < 50; ++i) {
    h.t += gap(rng);
    p.update(static_cast<int64_t>(std::floor((h.t - t0) * kRate)));
  }
  // Steps are floored, so the rate is within one step over the elapsed time.
  EXPECT_NEAR(p.rate(), kRate, 1.0 / 5.0);
  int64_t step = static_cast<int64_t>(std::floor((h.t - t0) * kRate));
  EXPECT_NEAR(p.eta_seconds(), (1000 - step) / p.rate(), 1e-9);
  EXPECT_TRUE(h.out.empty());  // kOff draws nothing
}

TEST(Progress, PlainLineFormatAndCadence) {
  Harness h;
  ProgressOptions o = h.options(ProgressStyle::kPlain);
  o.plain_interval_s = 5.0;
  Progress p("train", 200, o);
  h.t += 2.0;
  p.update(10, {{"reward", 0.42}, {"tok/s", 1234}});  // first update prints at once
  ASSERT_EQ(h.out.size(), 1u);
  EXPECT_EQ(h.out[0], "train 10/200 (5.0%) reward=0.42 tok/s=1234 | 5 step/s, elapsed 0:02, eta 0:38\n");
  h.t += 3.0;
  p.update(25, {{"reward", 0.5}, {"tok/s", 23456.7}});  // 3 s later: not yet
  EXPECT_EQ(h.out.size(), 1u);
  h.t += 2.0;
  p.update(35, {{"reward", 0.5}, {"tok/s", 23456.7}});  // 5 s after the last line
  ASSERT_EQ(h.out.size(), 2u);
  // Constant 5 steps/s throughout: eta = 165 / 5 = 33 s.
  EXPECT_EQ(h.out[1], "train 35/200 (17.5%) reward=0.5 tok/s=23.46k | 5 step/s, elapsed 0:07, eta 0:33\n");
  h.t += 3600.0;
  p.update(36);  // 1 step in an hour: slow rate shown as seconds per step
  ASSERT_EQ(h.out.size(), 3u);
  EXPECT_NE(h.out[2].find("s/step, elapsed 1:00:07, eta "), std::string::npos) << h.out[2];
  EXPECT_NE(h.out[2].find("reward=0.5 tok/s=23.46k"), std::string::npos) << "fields kept";
  p.finish();
  p.finish();  // idempotent
  ASSERT_EQ(h.out.size(), 4u);
  EXPECT_EQ(h.out[3].substr(0, 26), "train 36/200 (18.0%) rewar");
  EXPECT_EQ(h.out[3].substr(h.out[3].size() - 7), ", done\n");
  p.update(40);
  EXPECT_EQ(h.out.size(), 4u);  // nothing after finish
}

TEST(Progress, UnknownTotalHasNoPercentOrEta) {
  Harness h;
  Progress p("rollout", 0, h.options(ProgressStyle::kPlain));
  h.t += 4.0;
  p.update(8, {{"groups", 2}});
  EXPECT_EQ(h.out.at(0), "rollout 8 groups=2 | 2 step/s, elapsed 0:04\n");
  EXPECT_TRUE(std::isnan(p.eta_seconds()));
}

TEST(Progress, BarRedrawsAtMostTenTimesPerSecond) {
  Harness h;
  ProgressOptions o = h.options(ProgressStyle::kBar);
  o.bar_width = 10;
  Progress p("train", 100, o);
  for (int step = 1; step <= 100; ++step) {  // 100 steps over 2 s: 50 updates per second
    h.t += 0.02;
    p.update(step, {{"loss", 1.5}});
  }
  // Redraws when >= 0.1 s passed since the last one: every 5th or 6th update (0.02 is not
  // exact in binary), plus the forced one at 100%; never more than 10 per second.
  EXPECT_GE(h.out.size(), 16u);
  EXPECT_LE(h.out.size(), 21u);
  for (const auto& s : h.out) {
    EXPECT_EQ(s.substr(0, 1), "\r");
    EXPECT_EQ(s.substr(s.size() - 3), "\x1b[K");
  }
  EXPECT_EQ(h.out.back(), "\rtrain 100% [==========] 100/100 loss 1.5 | 0:02<0:00, 50 step/s\x1b[K");
  p.finish();
  EXPECT_EQ(h.out.back().back(), '\n');
}

TEST(Progress, BarLineShowsPartialFillAndFitsColumns) {
  Harness h;
  ProgressOptions o = h.options(ProgressStyle::kBar);
  o.bar_width = 10;
  Progress p("train", 40, o);
  h.t += 10.0;
  p.update(13, {{"reward", -0.25}});
  EXPECT_EQ(p.bar_line(), "train  32% [===>      ] 13/40 reward -0.25 | 0:10<0:21, 1.3 step/s");
  ProgressOptions narrow = h.options(ProgressStyle::kBar);
  narrow.columns = 30;
  Progress q("train", 40, narrow);
  q.update(5, {{"a_long_field_name", 1}, {"another", 2}});
  EXPECT_EQ(q.bar_line().size(), 29u);
}

TEST(Progress, FormatHelpers) {
  EXPECT_EQ(format_duration(7.4), "0:07");
  EXPECT_EQ(format_duration(723), "12:03");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(3 * 86400 + 4 * 3600 + 5 * 60 + 6), "3d04:05:06");
  EXPECT_EQ(format_duration(std::nan("")), "?");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_progress_value(0.42), "0.42");
  EXPECT_EQ(format_progress_value(1234), "1234");
  EXPECT_EQ(format_progress_value(9999), "9999");
  EXPECT_EQ(format_progress_value(12345), "12.35k");
  EXPECT_EQ(format_progress_value(-4567000), "-4.567M");
  EXPECT_EQ(format_progress_value(2.5e9), "2.5G");
  EXPECT_EQ(format_progress_value(1e-5), "1e-05");
  EXPECT_EQ(format_progress_value(INFINITY), "inf");
}

TEST(Progress, LogLinesStepAroundOnlyAnActiveStderrBar) {
  // With a custom sink the bar is not on stderr, so log lines pass unchanged.
  Harness h;
  Progress p("train", 10, h.options(ProgressStyle::kBar));
  p.update(1);
  EXPECT_EQ(progress_wrap_log_line("hello\n"), "hello\n");
}

}  // namespace
}  // namespace moerl
