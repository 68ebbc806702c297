// Metrics registry: counters, gauges and fixed-bucket histograms, each family keyed by
// name and each series by a small set of string labels; rendered as Prometheus text
// exposition (version 0.0.4) or as one JSON object (for metrics.jsonl, see base/jsonl.h).
//
//   metrics::Registry& reg = metrics::default_registry();
//   auto& tokens = reg.counter("moerl_rollout_tokens_total", "tokens generated", {{"worker", "0"}});
//   tokens.inc(128);
//   reg.gauge("moerl_policy_version", "policy version in use").set(7);
//   auto& lat = reg.histogram("moerl_step_seconds", "trainer step time", {0.1, 0.5, 1, 5});
//   lat.observe(0.42);
//   std::string text = reg.to_prometheus();
//
// Thread-safety: every method of Registry, Counter, Gauge and Histogram may be called from
// any thread. References returned by the registry stay valid for the registry's lifetime
// (series are never removed), so hot paths should look a series up once and keep it.
// Names follow the Prometheus conventions, enforced here: counters end in _total and nothing
// else does; every family has help text (its # HELP line), given when it is first registered.
// Failure: a bad metric/label name, a name against those conventions, a name reused with
// another type or help text, a histogram re-registered with other buckets, or non-increasing
// buckets throw moerl::Error.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/jsonl.h"

namespace moerl::metrics {

// Label name -> value. Sorted by name, which also fixes the order they are rendered in.
using Labels = std::map<std::string, std::string>;

enum class MetricType { kCounter, kGauge, kHistogram };
const char* metric_type_name(MetricType type);  // "counter", "gauge", "histogram"

// Monotonic count. inc() with a negative or non-finite amount throws (a counter that goes
// down breaks rate() in Prometheus).
class Counter {
 public:
  void inc(double amount = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down (queue depth, policy version, loss).
class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Fixed upper bounds, given at creation; an implicit +Inf bucket follows the last one.
// Counts are per bucket (not cumulative) inside; snapshot() returns cumulative counts as
// Prometheus expects. NaN observations are counted in +Inf and poison the sum, as in
// the Prometheus client libraries.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);

  struct Snapshot {
    std::vector<double> upper_bounds;  // without the +Inf bucket
    std::vector<uint64_t> cumulative;  // size upper_bounds.size() + 1; last == count
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;
  const std::vector<double>& upper_bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;                       // immutable after construction
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1 entries
  std::atomic<double> sum_{0.0};
};

// Bucket helpers: start, start*factor, ... (count values); start, start+width, ...
std::vector<double> exponential_buckets(double start, double factor, int count);
std::vector<double> linear_buckets(double start, double width, int count);

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Returns the series for (name, labels), creating family and series on first use.
  // `help` is required on the first call for a name and must be the same on every later call
  // (empty help on later calls is accepted and means "same as before").
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help,
                       const std::vector<double>& upper_bounds, const Labels& labels = {});

  // Prometheus text format: families sorted by name, series sorted by labels, each family
  // with "# HELP" and "# TYPE" lines; histograms as _bucket{le=...}, _sum, _count.
  std::string to_prometheus() const;

  // Flat snapshot for metrics.jsonl: {"name{a=\"x\"}": value, ...}; histograms give
  // name_sum and name_count entries (buckets are left to the Prometheus view).
  nlohmann::json to_json() const;

 private:
  struct Series {
    Labels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct Family {
    MetricType type;
    std::string help;
    std::vector<double> buckets;  // histograms only
    std::map<Labels, Series> series;
  };
  Series& series_for(const std::string& name, const std::string& help, MetricType type,
                     const Labels& labels, const std::vector<double>* buckets);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;  // guarded by mu_; entries never erased
};

// Process-wide registry, for components that do not get one passed in.
Registry& default_registry();

// Prometheus number formatting: shortest round-trip decimal, "+Inf", "-Inf", "NaN".
std::string format_prometheus_value(double v);

}  // namespace moerl::metrics
