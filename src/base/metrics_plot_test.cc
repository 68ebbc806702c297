// Tests for metrics.jsonl -> panels (field lookup, sparse and null values, errors) and the
// `moerl plot` command end to end (run through MOERL_BIN when the test has it).
#include "base/metrics_plot.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>

#include "base/error.h"
#include "base/jsonl.h"

namespace moerl {
namespace {

std::vector<nlohmann::json> sample_rows(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<nlohmann::json> rows;
  for (int step = 1; step <= n; ++step) {
    nlohmann::json r = {{"step", step}, {"reward", u(rng)}, {"loss", 2 + u(rng)}, {"tag", "x"}};
    if (step % 5 == 0) r["eval"] = {{"reward", u(rng)}};
    rows.push_back(r);
  }
  return rows;
}

TEST(MetricsPlot, PanelsFromFieldsAndGroups) {
  auto rows = sample_rows(20, 3);
  rows[7]["loss"] = nullptr;  // a NaN written as null
  MetricsPlotSpec spec;
  spec.panels = {"reward+eval.reward", "loss"};
  std::vector<PlotPanel> panels = metrics_panels(rows, spec);
  ASSERT_EQ(panels.size(), 2u);
  EXPECT_EQ(panels[0].title, "reward + eval.reward");
  EXPECT_EQ(panels[0].x_label, "step");
  ASSERT_EQ(panels[0].series.size(), 2u);
  const PlotSeries& reward = panels[0].series[0];
  ASSERT_EQ(reward.xs.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(reward.xs[i], i + 1);
    EXPECT_EQ(reward.ys[i], rows[i]["reward"].get<double>());
  }
  const PlotSeries& eval = panels[0].series[1];
  EXPECT_EQ(eval.name, "eval.reward");
  EXPECT_EQ(eval.xs, (std::vector<double>{5, 10, 15, 20}));  // sparse field: only rows that have it
  EXPECT_EQ(eval.ys[2], rows[14]["eval"]["reward"].get<double>());
  const PlotSeries& loss = panels[1].series[0];
  ASSERT_EQ(loss.ys.size(), 20u);
  EXPECT_TRUE(std::isnan(loss.ys[7]));  // null kept as a gap
}

TEST(MetricsPlot, DefaultsToEveryNumericFieldAndSortsByX) {
  auto rows = sample_rows(10, 5);
  std::swap(rows[2], rows[6]);  // out-of-order steps (a resumed run appending)
  EXPECT_EQ(numeric_fields(rows), (std::vector<std::string>{"loss", "reward", "step", "eval.reward"}));
  std::vector<PlotPanel> panels = metrics_panels(rows, MetricsPlotSpec{});
  ASSERT_EQ(panels.size(), 3u);  // loss, reward, eval.reward ("tag" is not numeric, step is x)
  EXPECT_EQ(panels[2].title, "eval.reward");
  const auto& xs = panels[1].series[0].xs;
  EXPECT_TRUE(std::is_sorted(xs.begin(), xs.end()));
  MetricsPlotSpec by_line;
  by_line.x = "line";
  by_line.panels = {"step"};
  auto p = metrics_panels(rows, by_line);
  EXPECT_EQ(p[0].series[0].xs.front(), 1);
  EXPECT_EQ(p[0].series[0].ys[2], 7);  // the swapped row, at its line
}

TEST(MetricsPlot, UnknownFieldsNameWhatExists) {
  auto rows = sample_rows(5, 1);
  MetricsPlotSpec spec;
  spec.panels = {"rewrd"};
  try {
    metrics_panels(rows, spec);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'rewrd'"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("reward"), std::string::npos) << e.hint();
  }
  spec.panels = {"reward"};
  spec.x = "time";
  EXPECT_THROW(metrics_panels(rows, spec), Error);
  spec.x = "step";
  spec.panels = {"reward+"};
  EXPECT_THROW(metrics_panels(rows, spec), Error);
  EXPECT_THROW(metrics_panels({}, MetricsPlotSpec{}), Error);
}

TEST(MetricsPlot, CommandWritesPngAndSvg) {
  const char* bin = std::getenv("MOERL_BIN");
  if (bin == nullptr || ::access(bin, X_OK) != 0) GTEST_SKIP() << "no moerl binary at MOERL_BIN (run through ctest after a full build)";
  std::string dir = testing::TempDir() + "/mplot." + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  {
    metrics::JsonlWriter w(dir + "/metrics.jsonl", metrics::JsonlMode::kTruncate);
    for (const auto& r : sample_rows(50, 9)) w.write(r);
  }
  std::string cmd = std::string(bin) + " plot " + dir + "/metrics.jsonl --y reward+eval.reward,loss --width 900";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  int rc = 0;
  std::ifstream in(dir + "/plot.png", std::ios::binary);
  std::vector<uint8_t> png((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(png.size(), 33u);
  EXPECT_EQ(std::string(png.begin() + 1, png.begin() + 4), "PNG");
  auto be32 = [&](size_t o) { return (uint32_t{png[o]} << 24) | (uint32_t{png[o + 1]} << 16) | (uint32_t{png[o + 2]} << 8) | png[o + 3]; };
  EXPECT_EQ(be32(16), 900u);  // IHDR width
  EXPECT_EQ(be32(20), 440u);  // one row of panels
  // SVG by the extension of --out.
  cmd = std::string(bin) + " plot " + dir + "/metrics.jsonl --y reward --out " + dir + "/p.svg";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream svg_in(dir + "/p.svg");
  std::string svg((std::istreambuf_iterator<char>(svg_in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u) << svg.substr(0, 100);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("width=\"1200px\""), std::string::npos) << svg.substr(0, 300);
  // A misspelled field fails with exit code 2 (bad input); so does an unknown format.
  rc = std::system((std::string(bin) + " plot " + dir + "/metrics.jsonl --out p.jpg 2>/dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  rc = std::system((std::string(bin) + " plot " + dir + "/metrics.jsonl --y nope 2>/dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace moerl
