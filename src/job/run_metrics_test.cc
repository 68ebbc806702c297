// RunMetrics: each metrics.jsonl row as TensorBoard scalars (read back by the test's own
// decoder) and as Prometheus series (gauges per field, counters for the counts); the
// [metrics] section's validation.
#include "job/run_metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "base/error.h"
#include "base/files.h"
#include "io/tb/test_event_reader.h"

namespace moerl::job {
namespace {

namespace fs = std::filesystem;

std::string text_of(const metrics::Registry& reg) { return reg.to_prometheus(); }

MetricsSection parse(const std::string& keys) {
  ConfigDoc doc = ConfigDoc::parse("[metrics]\n" + keys, "job.toml");
  return read_metrics_section(doc.root().table("metrics"));
}

TEST(MetricsSection, DefaultsOffAndValidates) {
  MetricsSection m = parse("");
  EXPECT_EQ(m.prometheus_port, kPrometheusOff);
  EXPECT_FALSE(m.tensorboard);
  EXPECT_EQ(m.final_scrape_wait_s, 30);
  m = parse("prometheus_port = 0\nprometheus_host = \"127.0.0.1\"\ntensorboard = true\nfinal_scrape_wait_s = 2.5\n");
  EXPECT_EQ(m.final_scrape_wait_s, 2.5);
  EXPECT_EQ(m.prometheus_port, 0);
  EXPECT_EQ(m.prometheus_host, "127.0.0.1");
  EXPECT_TRUE(m.tensorboard);
  EXPECT_THROW(parse("prometheus_port = 70000\n"), Error);
  EXPECT_THROW(parse("prometheus_port = -2\n"), Error);
  EXPECT_THROW(parse("prometheus_host = \"\"\n"), Error);
  EXPECT_THROW(parse("final_scrape_wait_s = -1\n"), Error);
  EXPECT_THROW(parse("tensorbord = true\n"), Error);  // a typo is rejected
}

TEST(RunMetrics, RowsBecomeTensorBoardScalarsAndPrometheusSeries) {
  const fs::path dir = fs::temp_directory_path() / ("moerl-run-metrics-" + std::to_string(::getpid()));
  remove_tree(dir.string());
  fs::create_directories(dir);
  metrics::Registry reg;
  std::vector<nlohmann::json> rows;
  {
    RunMetrics m(dir.string(), metrics::JsonlMode::kTruncate, {.tensorboard = true}, reg);
    for (int s = 1; s <= 3; ++s) {
      rows.push_back({{"phase", "sft"}, {"sft_step", s}, {"loss", 2.0 / s}, {"steps_skipped_nonfinite", 0}});
    }
    for (int s = 1; s <= 4; ++s) {
      nlohmann::json r = {{"phase", "rl"},      {"step", s},        {"reward", 0.1 * s},  {"loss", 1.0 / (s + 1)},
                          {"samples", 16},      {"version", s},     {"tasks_lost", 0},    {"duplicates_dropped", s / 2},
                          {"flag", true},       {"note", "x"},      {"reward_extra", {{"format", 0.25 * s}}},
                          {"step_s", 0.5},      {"rollout_tokens_per_s", 100}, {"records_quarantined", s >= 3 ? 3 : 0}};
      if (s == 2) r["kl"] = NAN;
      rows.push_back(r);
    }
    for (const auto& r : rows) m.write(r);
    ASSERT_FALSE(m.tensorboard_path().empty());
    EXPECT_EQ(fs::path(m.tensorboard_path()).parent_path(), dir / "tb");
  }
  // TensorBoard: version event, then one event per row with every numeric leaf.
  std::string file;
  for (const auto& e : fs::directory_iterator(dir / "tb")) file = e.path().string();
  std::vector<tb::Event> ev = tb::testing::read_events(file);
  ASSERT_EQ(ev.size(), rows.size() + 1);
  EXPECT_EQ(ev[0].file_version(), "brain.Event:2");
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& r = rows[i];
    const tb::Event& e = ev[i + 1];
    EXPECT_EQ(e.step(), r.contains("step") ? r["step"].get<int64_t>() : r["sft_step"].get<int64_t>());
    std::map<std::string, float> got;
    for (const auto& v : e.summary().value()) got[v.tag()] = v.simple_value();
    const std::string p = r["phase"].get<std::string>() + "/";
    size_t numeric = 0;
    for (auto it = r.begin(); it != r.end(); ++it) {
      if (!it.value().is_number()) continue;
      ++numeric;
      ASSERT_TRUE(got.count(p + it.key())) << p + it.key();
      const double want = it.value().get<double>();
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[p + it.key()]));
      } else {
        EXPECT_EQ(got[p + it.key()], static_cast<float>(want)) << p + it.key();
      }
    }
    if (r.contains("reward_extra")) {
      ++numeric;
      EXPECT_EQ(got[p + "reward_extra/format"], static_cast<float>(r["reward_extra"]["format"].get<double>()));
    }
    EXPECT_EQ(got.size(), numeric) << "strings and booleans are not scalars";
  }
  // Prometheus: the newest value of each field; counts as counters.
  EXPECT_EQ(reg.gauge("moerl_rl_step", "").value(), 4);
  EXPECT_DOUBLE_EQ(reg.gauge("moerl_rl_reward", "").value(), 0.4);
  EXPECT_DOUBLE_EQ(reg.gauge("moerl_sft_loss", "").value(), 2.0 / 3);
  EXPECT_DOUBLE_EQ(reg.gauge("moerl_rl_reward_extra_format", "").value(), 1.0);
  EXPECT_EQ(reg.gauge("moerl_rl_version", "").value(), 4);
  EXPECT_NE(text_of(reg).find("moerl_rl_step_seconds 0.5\n"), std::string::npos) << "units spelled out";
  EXPECT_NE(text_of(reg).find("moerl_rl_rollout_tokens_per_second 100\n"), std::string::npos);
  EXPECT_EQ(reg.counter("moerl_rl_samples_total", "").value(), 64) << "per-step counts add up";
  EXPECT_EQ(reg.counter("moerl_duplicates_dropped_total", "").value(), 2) << "running totals are followed";
  EXPECT_EQ(reg.counter("moerl_records_quarantined_total", "").value(), 3);
  EXPECT_EQ(text_of(reg).find("moerl_rl_records_quarantined "), std::string::npos) << "a count is not also a gauge";
  const std::string text = reg.to_prometheus();
  EXPECT_EQ(text.find("moerl_rl_samples "), std::string::npos) << "a count is not also a gauge";
  EXPECT_NE(text.find("# HELP moerl_rl_reward Mean reward of the step's samples.\n"), std::string::npos) << text;
  // metrics.jsonl holds the rows as written.
  std::vector<nlohmann::json> back = metrics::read_jsonl((dir / "metrics.jsonl").string());
  ASSERT_EQ(back.size(), rows.size());
  EXPECT_EQ(back[4]["reward"], rows[4]["reward"]);
  remove_tree(dir.string());
}

TEST(RunMetrics, WithoutTensorBoardWritesNoEventFile) {
  const fs::path dir = fs::temp_directory_path() / ("moerl-run-metrics-off-" + std::to_string(::getpid()));
  remove_tree(dir.string());
  fs::create_directories(dir);
  metrics::Registry reg;
  {
    RunMetrics m(dir.string(), metrics::JsonlMode::kTruncate, {}, reg);
    m.write({{"phase", "rl"}, {"step", 1}, {"reward", 0.5}});
    EXPECT_EQ(m.tensorboard_path(), "");
    // Names that sanitise alike keep the first series, and the row is still written.
    EXPECT_NO_THROW(m.write({{"phase", "rl"}, {"step", 2}, {"reward_extra", {{"a-b", 1.0}, {"a_b", 2.0}}}}));
    EXPECT_NO_THROW(m.write({{"phase", "rl"}, {"step", 3}, {"reward_extra", {{"a-b", 3.0}}}}));
  }
  EXPECT_FALSE(fs::exists(dir / "tb"));
  EXPECT_EQ(reg.gauge("moerl_rl_reward", "").value(), 0.5);
  EXPECT_EQ(metrics::read_jsonl((dir / "metrics.jsonl").string()).size(), 3u);
  remove_tree(dir.string());
}

}  // namespace
}  // namespace moerl::job
