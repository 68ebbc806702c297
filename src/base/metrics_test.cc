// Tests for the metrics registry (Prometheus text, concurrency) and JSONL files.
#include "base/metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include "base/error.h"

namespace moerl::metrics {
namespace {

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "/" + name + "." + std::to_string(::getpid());
}

TEST(Metrics, PrometheusTextIsExact) {
  Registry reg;
  reg.counter("req_total", "Requests served.", {{"method", "get"}, {"code", "200"}}).inc(3);
  reg.counter("req_total", "", {{"code", "500"}, {"method", "post"}}).inc(1.5);
  reg.gauge("queue_depth", "Tasks waiting.\nsecond line").set(-2.25);
  auto& h = reg.histogram("step_seconds", "Step time.", {0.125, 0.5, 1}, {{"role", "train"}});
  for (double v : {0.0625, 0.125, 0.25, 0.75, 2.0}) h.observe(v);
  reg.gauge("label_escape", "Escapes.", {{"path", "a\"b\\c\nd"}}).set(1e-7);

  const std::string expected =
      "# HELP label_escape Escapes.\n"
      "# TYPE label_escape gauge\n"
      "label_escape{path=\"a\\\"b\\\\c\\nd\"} 1e-07\n"
      "# HELP queue_depth Tasks waiting.\\nsecond line\n"
      "# TYPE queue_depth gauge\n"
      "queue_depth -2.25\n"
      "# HELP req_total Requests served.\n"
      "# TYPE req_total counter\n"
      "req_total{code=\"200\",method=\"get\"} 3\n"
      "req_total{code=\"500\",method=\"post\"} 1.5\n"
      "# HELP step_seconds Step time.\n"
      "# TYPE step_seconds histogram\n"
      "step_seconds_bucket{role=\"train\",le=\"0.125\"} 2\n"
      "step_seconds_bucket{role=\"train\",le=\"0.5\"} 3\n"
      "step_seconds_bucket{role=\"train\",le=\"1\"} 4\n"
      "step_seconds_bucket{role=\"train\",le=\"+Inf\"} 5\n"
      "step_seconds_sum{role=\"train\"} 3.1875\n"
      "step_seconds_count{role=\"train\"} 5\n";
  EXPECT_EQ(reg.to_prometheus(), expected);
}

TEST(Metrics, SameNameAndLabelsGiveSameSeries) {
  Registry reg;
  Counter& a = reg.counter("x_total", "x", {{"k", "1"}});
  Counter& b = reg.counter("x_total", "x", {{"k", "1"}});
  Counter& c = reg.counter("x_total", "x", {{"k", "2"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
}

TEST(Metrics, MisuseThrowsWithHint) {
  Registry reg;
  reg.counter("x_total", "x");
  EXPECT_THROW(reg.gauge("x_total", "x"), Error);
  EXPECT_THROW(reg.counter("x_total", "other help"), Error);
  EXPECT_THROW(reg.counter("9bad", "x"), Error);
  EXPECT_THROW(reg.counter("ok_total", "x", {{"__reserved", "v"}}), Error);
  // Prometheus naming conventions: counters and only counters end in _total; help is required.
  EXPECT_THROW(reg.counter("requests", "x"), Error);
  EXPECT_THROW(reg.gauge("depth_total", "x"), Error);
  EXPECT_THROW(reg.histogram("lat_total", "x", {1}), Error);
  EXPECT_THROW(reg.gauge("no_help", ""), Error);
  EXPECT_NO_THROW(reg.gauge("depth", "x"));
  EXPECT_THROW(reg.histogram("h", "x", {1, 0.5}), Error);
  EXPECT_THROW(reg.histogram("h2", "x", {1, 2}, {{"le", "1"}}), Error);
  reg.histogram("h3", "x", {1, 2});
  EXPECT_THROW(reg.histogram("h3", "x", {1, 3}), Error);
  EXPECT_THROW(reg.counter("x_total", "").inc(-1), Error);
  try {
    reg.gauge("h3", "x");
    ADD_FAILURE() << "a histogram re-registered as a gauge";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("h3 is a histogram"), std::string::npos) << e.what();
    EXPECT_FALSE(e.hint().empty());
  }
}

TEST(Metrics, ConcurrentIncrementsSumExactly) {
  Registry reg;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&reg, t] {
      // Look the series up inside the thread too: registration must be race-free.
      Counter& c = reg.counter("hits_total", "hits", {{"shard", std::to_string(t % 2)}});
      Gauge& g = reg.gauge("level", "level");
      Histogram& h = reg.histogram("lat", "lat", {1, 2, 3});
      for (int i = 0; i < kPerThread; ++i) {
        c.inc();
        g.add(0.5);  // exact in binary floating point
        h.observe(static_cast<double>(i % 4));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(reg.counter("hits_total", "", {{"shard", "0"}}).value(), kThreads / 2 * kPerThread);
  EXPECT_EQ(reg.counter("hits_total", "", {{"shard", "1"}}).value(), kThreads / 2 * kPerThread);
  EXPECT_EQ(reg.gauge("level", "").value(), 0.5 * kThreads * kPerThread);
  Histogram::Snapshot s = reg.histogram("lat", "", {1, 2, 3}).snapshot();
  const uint64_t n = uint64_t{kThreads} * kPerThread;
  EXPECT_EQ(s.count, n);
  EXPECT_EQ(s.cumulative[0], n / 2);      // values 0 and 1
  EXPECT_EQ(s.cumulative[1], n * 3 / 4);  // + value 2
  EXPECT_EQ(s.cumulative[3], n);
  EXPECT_EQ(s.sum, 1.5 * n);  // mean of 0,1,2,3
}

TEST(Metrics, HistogramMatchesBruteForceOnRandomValues) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-1.0, 12.0);
  std::vector<double> bounds = exponential_buckets(0.5, 2, 5);  // 0.5 .. 8
  ASSERT_EQ(bounds, (std::vector<double>{0.5, 1, 2, 4, 8}));
  Histogram h(bounds);
  std::vector<double> vals(997);
  double sum = 0;
  for (double& v : vals) {
    v = dist(rng);
    h.observe(v);
    sum += v;
  }
  auto s = h.snapshot();
  for (size_t i = 0; i < bounds.size(); ++i) {
    uint64_t expect = std::count_if(vals.begin(), vals.end(), [&](double v) { return v <= bounds[i]; });
    EXPECT_EQ(s.cumulative[i], expect) << "le=" << bounds[i];
  }
  EXPECT_EQ(s.cumulative.back(), vals.size());
  EXPECT_NEAR(s.sum, sum, 1e-9 * std::abs(sum));
  EXPECT_EQ(linear_buckets(1, 0.5, 3), (std::vector<double>{1, 1.5, 2}));
}

TEST(Metrics, ToJsonIsFlat) {
  Registry reg;
  reg.counter("a_total", "a", {{"w", "1"}}).inc(2);
  reg.histogram("h", "h", {1}).observe(0.25);
  nlohmann::json j = reg.to_json();
  EXPECT_EQ(j["a_total{w=\"1\"}"].get<double>(), 2.0);
  EXPECT_EQ(j["h_sum"].get<double>(), 0.25);
  EXPECT_EQ(j["h_count"].get<uint64_t>(), 1u);
}

TEST(Jsonl, LinesParseBack) {
  std::string path = temp_path("metrics.jsonl");
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> dist(-5, 5);
  std::vector<nlohmann::json> written;
  {
    JsonlWriter w(path, JsonlMode::kTruncate, JsonlSync::kFsync);
    for (int step = 1; step <= 50; ++step) {
      nlohmann::json row = {{"step", step}, {"reward", dist(rng)}, {"loss", dist(rng)},
                            {"tag", "run \"a\"\n"}, {"eval", {{"acc", dist(rng)}}}};
      w.write(row);
      written.push_back(row);
    }
    w.write({{"step", 51}, {"loss", std::nan("")}});
    EXPECT_EQ(w.lines_written(), 51);
  }
  std::vector<nlohmann::json> rows = read_jsonl(path);
  ASSERT_EQ(rows.size(), 51u);
  for (size_t i = 0; i < written.size(); ++i) {
    EXPECT_EQ(rows[i], written[i]) << "line " << i + 1;
    EXPECT_EQ(rows[i]["reward"].get<double>(), written[i]["reward"].get<double>());  // round-trip exact
  }
  EXPECT_TRUE(rows[50]["loss"].is_null());

  // Appending (default mode) keeps earlier lines; a torn final line is skipped.
  { JsonlWriter w(path); w.write({{"step", 52}}); }
  { std::ofstream f(path, std::ios::app); f << "{\"step\": 53, \"rew"; }
  rows = read_jsonl(path);
  ASSERT_EQ(rows.size(), 52u);
  EXPECT_EQ(rows.back()["step"].get<int>(), 52);
  std::remove(path.c_str());
}

TEST(Jsonl, ConcurrentWritersDoNotInterleave) {
  std::string path = temp_path("concurrent.jsonl");
  {
    JsonlWriter w(path, JsonlMode::kTruncate);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&w, t] {
        for (int i = 0; i < 500; ++i) w.write({{"t", t}, {"i", i}, {"pad", std::string(200, 'x')}});
      });
    }
    for (auto& th : threads) th.join();
  }
  auto rows = read_jsonl(path);
  ASSERT_EQ(rows.size(), 2000u);
  std::vector<int> next(4, 0);
  for (const auto& r : rows) {
    int t = r["t"].get<int>();
    EXPECT_EQ(r["i"].get<int>(), next[t]++);  // per-thread order preserved
  }
  std::remove(path.c_str());
}

TEST(Jsonl, BadInputNamesFileAndLine) {
  std::string path = temp_path("bad.jsonl");
  { std::ofstream f(path); f << "{\"step\": 1}\n\nnot json\n{\"step\": 2}\n"; }
  try {
    read_jsonl(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_jsonl(path + ".missing"), Error);
  EXPECT_THROW(JsonlWriter("/nonexistent-dir/x.jsonl"), Error);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace moerl::metrics
