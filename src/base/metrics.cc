// Metrics registry implementation: atomic series values, name/label validation, and the
// Prometheus text and flat-JSON renderings. JSONL file I/O lives in jsonl.cc.
#include "base/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "base/error.h"

namespace moerl::metrics {
namespace {

bool valid_metric_name(const std::string& s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool valid_label_name(const std::string& s) {
  if (s.empty() || s.rfind("__", 0) == 0) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Label values escape backslash, double quote and newline; HELP escapes backslash and
// newline only (Prometheus exposition format).
std::string escape(const std::string& s, bool quote) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// {a="x",b="y"} plus an optional trailing le="..." pair; empty string when no labels.
std::string render_labels(const Labels& labels, const std::string* le = nullptr) {
  if (labels.empty() && le == nullptr) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ",";
    first = false;
    out += k + "=\"" + escape(v, true) + "\"";
  }
  if (le != nullptr) {
    if (!first) out += ",";
    out += "le=\"" + *le + "\"";
  }
  out += "}";
  return out;
}

void check_bounds(const std::string& name, const std::vector<double>& b) {
  for (size_t i = 0; i < b.size(); ++i) {
    if (!std::isfinite(b[i]) || (i > 0 && !(b[i] > b[i - 1]))) {
      std::ostringstream os;
      os << "histogram " << name << ": bucket bounds must be finite and strictly increasing, got [";
      for (size_t j = 0; j < b.size(); ++j) os << (j ? ", " : "") << format_prometheus_value(b[j]);
      os << "]";
      throw Error(os.str(), "list upper bounds in increasing order; +Inf is added automatically");
    }
  }
}

}  // namespace

const char* metric_type_name(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

std::string format_prometheus_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

void Counter::inc(double amount) {
  if (!(amount >= 0.0) || std::isinf(amount)) {
    throw Error("counter increment " + format_prometheus_value(amount) +
                    " is not a finite non-negative number",
                "use a Gauge for values that can go down");
  }
  value_.fetch_add(amount, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  check_bounds("(unnamed)", bounds_);
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0);
}

void Histogram::observe(double v) {
  // Bucket i counts bounds_[i-1] < v <= bounds_[i]; NaN falls through to +Inf.
  size_t i = std::isnan(v) ? bounds_.size()
                           : static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                                 bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t acc = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    acc += counts_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = acc;
  }
  s.count = acc;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> exponential_buckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) {
    throw Error("exponential_buckets(start=" + format_prometheus_value(start) + ", factor=" +
                    format_prometheus_value(factor) + ", count=" + std::to_string(count) +
                    ") is invalid",
                "need start > 0, factor > 1, count >= 1");
  }
  std::vector<double> b;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) b.push_back(v);
  return b;
}

std::vector<double> linear_buckets(double start, double width, int count) {
  if (!(width > 0) || count < 1 || !std::isfinite(start)) {
    throw Error("linear_buckets(start=" + format_prometheus_value(start) + ", width=" +
                    format_prometheus_value(width) + ", count=" + std::to_string(count) +
                    ") is invalid",
                "need a finite start, width > 0, count >= 1");
  }
  std::vector<double> b;
  for (int i = 0; i < count; ++i) b.push_back(start + width * i);
  return b;
}

Registry::Series& Registry::series_for(const std::string& name, const std::string& help,
                                       MetricType type, const Labels& labels,
                                       const std::vector<double>* buckets) {
  if (!valid_metric_name(name)) {
    throw Error("metric name '" + name + "' is invalid",
                "use [a-zA-Z_:][a-zA-Z0-9_:]*, e.g. moerl_rollout_tokens_total");
  }
  for (const auto& [k, v] : labels) {
    if (!valid_label_name(k) || (type == MetricType::kHistogram && k == "le")) {
      throw Error("metric " + name + ": label name '" + k + "' is invalid",
                  "use [a-zA-Z_][a-zA-Z0-9_]* not starting with __ ('le' is reserved for histograms)");
    }
  }
  if (buckets != nullptr) check_bounds(name, *buckets);
  const bool total = name.size() > 6 && name.ends_with("_total");
  if (type == MetricType::kCounter && !total) {
    throw Error("counter '" + name + "' does not end in _total",
                "name counters NAME_total (Prometheus convention), e.g. moerl_rollout_tokens_total");
  }
  if (type != MetricType::kCounter && total) {
    throw Error(std::string(metric_type_name(type)) + " '" + name + "' ends in _total",
                "the _total suffix marks counters; drop it or make the metric a counter");
  }

  std::lock_guard<std::mutex> lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) {
    if (help.empty()) {
      throw Error("metric " + name + " is registered without help text",
                  "give a one-line description the first time (it becomes the # HELP line)");
    }
    Family f;
    f.type = type;
    f.help = help;
    if (buckets != nullptr) f.buckets = *buckets;
    it = families_.emplace(name, std::move(f)).first;
  }
  Family& fam = it->second;
  if (fam.type != type) {
    throw Error(std::string("metric ") + name + " is a " + metric_type_name(fam.type) +
                    ", requested as a " + metric_type_name(type),
                "give each metric one type; rename one of them");
  }
  if (!help.empty() && fam.help.empty()) fam.help = help;
  if (!help.empty() && help != fam.help) {
    throw Error("metric " + name + ": help '" + help + "' differs from the registered '" +
                    fam.help + "'",
                "register a metric with one help text (or pass empty help after the first time)");
  }
  if (buckets != nullptr && *buckets != fam.buckets) {
    throw Error("histogram " + name + " re-registered with different buckets",
                "every series of one histogram must use the same bucket bounds");
  }
  auto sit = fam.series.find(labels);
  if (sit == fam.series.end()) {
    Series s;
    s.labels = labels;
    switch (type) {
      case MetricType::kCounter: s.counter = std::make_unique<Counter>(); break;
      case MetricType::kGauge: s.gauge = std::make_unique<Gauge>(); break;
      case MetricType::kHistogram: s.histogram = std::make_unique<Histogram>(fam.buckets); break;
    }
    sit = fam.series.emplace(labels, std::move(s)).first;
  }
  return sit->second;
}

Counter& Registry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  return *series_for(name, help, MetricType::kCounter, labels, nullptr).counter;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  return *series_for(name, help, MetricType::kGauge, labels, nullptr).gauge;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help,
                               const std::vector<double>& upper_bounds, const Labels& labels) {
  return *series_for(name, help, MetricType::kHistogram, labels, &upper_bounds).histogram;
}

std::string Registry::to_prometheus() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, fam] : families_) {
    out += "# HELP " + name + " " + escape(fam.help, false) + "\n";
    out += "# TYPE " + name + " " + metric_type_name(fam.type) + "\n";
    for (const auto& [labels, s] : fam.series) {
      switch (fam.type) {
        case MetricType::kCounter:
          out += name + render_labels(labels) + " " + format_prometheus_value(s.counter->value()) + "\n";
          break;
        case MetricType::kGauge:
          out += name + render_labels(labels) + " " + format_prometheus_value(s.gauge->value()) + "\n";
          break;
        case MetricType::kHistogram: {
          Histogram::Snapshot snap = s.histogram->snapshot();
          for (size_t i = 0; i < snap.cumulative.size(); ++i) {
            std::string le = i < snap.upper_bounds.size()
                                 ? format_prometheus_value(snap.upper_bounds[i])
                                 : std::string("+Inf");
            out += name + "_bucket" + render_labels(labels, &le) + " " +
                   std::to_string(snap.cumulative[i]) + "\n";
          }
          out += name + "_sum" + render_labels(labels) + " " + format_prometheus_value(snap.sum) + "\n";
          out += name + "_count" + render_labels(labels) + " " + std::to_string(snap.count) + "\n";
          break;
        }
      }
    }
  }
  return out;
}

nlohmann::json Registry::to_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, fam] : families_) {
    for (const auto& [labels, s] : fam.series) {
      std::string l = render_labels(labels);
      switch (fam.type) {
        case MetricType::kCounter: out[name + l] = s.counter->value(); break;
        case MetricType::kGauge: out[name + l] = s.gauge->value(); break;
        case MetricType::kHistogram: {
          Histogram::Snapshot snap = s.histogram->snapshot();
          out[name + "_sum" + l] = snap.sum;
          out[name + "_count" + l] = snap.count;
          break;
        }
      }
    }
  }
  return out;
}

Registry& default_registry() {
  static Registry* reg = new Registry();  // NOTE: leaked on purpose; outlives static users
  return *reg;
}

}  // namespace moerl::metrics
