// metrics.jsonl rows fanned out to TensorBoard scalars and Prometheus series.
#include "job/run_metrics.h"

#include <cmath>
#include <filesystem>
#include <map>

#include "base/error.h"
#include "base/log.h"

namespace moerl::job {

namespace {

// Help text of the well-known row fields (by field name, any phase).
const std::map<std::string, std::string>& field_help() {
  static const std::map<std::string, std::string> h = {
      {"step", "RL steps done."},
      {"sft_step", "SFT steps done."},
      {"reward", "Mean reward of the step's samples."},
      {"reward_std", "Standard deviation of the step's rewards."},
      {"loss", "Training loss of the step."},
      {"grad_norm", "Gradient norm of the step (before clipping)."},
      {"lr", "Learning rate of the step."},
      {"kl", "KL divergence to the reference policy."},
      {"entropy", "Mean token entropy of the policy."},
      {"response_len", "Mean response length in tokens."},
      {"rollout_tokens_per_s", "Response tokens generated per second of generation, last step."},
      {"step_s", "Seconds of the last RL step (experience + training + publication)."},
      {"staleness_mean", "Mean policy versions behind of the records trained in the last step."},
      {"staleness_max", "Most policy versions behind among the records trained in the last step."},
      {"token_lag_mean", "Mean policy versions behind of the response tokens trained in the last step (per token)."},
      {"queue_depth", "Tasks queued (ready + leased) after the last step."},
      {"tasks_leased", "Tasks leased by rollout workers after the last step."},
      {"tasks_lost", "Tasks created but not completed, queued, buffered or dead-lettered: records in transit "
                     "show here for a moment; a value that stays above 0 means lost tasks."},
      {"version", "Policy (weight) version published after the last step."},
      {"eval_reward", "Mean reward of the last periodic evaluation."},
  };
  return h;
}

std::string prometheus_name(const std::string& tag) {
  std::string n = "moerl_";
  for (char c : tag) n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  // Units spelled out, as Prometheus names want them (step_s -> step_seconds).
  if (n.ends_with("_per_s")) {
    n += "econd";
  } else if (n.ends_with("_s")) {
    n += "econds";
  }
  for (const char* suffix : {"_total", "_count", "_sum", "_bucket"}) {
    if (n.ends_with(suffix)) n += "_value";  // those suffixes mean other metric types
  }
  return n;
}

void collect(const nlohmann::json& v, const std::string& prefix, std::vector<std::pair<std::string, double>>& out) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      collect(it.value(), prefix.empty() ? it.key() : prefix + "/" + it.key(), out);
    }
  } else if (v.is_number() && !prefix.empty()) {
    out.emplace_back(prefix, v.get<double>());
  }
}

}  // namespace

MetricsSection read_metrics_section(ConfigTable t) {
  MetricsSection m;
  m.prometheus_port = t.integer("prometheus_port", kPrometheusOff, {-1, 65535});
  m.prometheus_host = t.string("prometheus_host", m.prometheus_host);
  if (m.prometheus_host.empty()) {
    throw Error("config: metrics.prometheus_host is empty", "use \"0.0.0.0\" (all interfaces) or \"127.0.0.1\"");
  }
  m.final_scrape_wait_s = t.number("final_scrape_wait_s", m.final_scrape_wait_s, {.min = 0, .max = 3600});
  m.tensorboard = t.boolean("tensorboard", false);
  t.done();
  return m;
}

const std::vector<CounterField>& counter_fields() {
  static const std::vector<CounterField> f = {
      {"samples", "moerl_rl_samples_total", "Samples trained.", CountKind::kPerStep},
      {"steps_skipped_nonfinite", "moerl_steps_skipped_nonfinite_total",
       "Optimizer steps skipped for a non-finite gradient norm.", CountKind::kRunningTotal},
      {"groups_filtered", "moerl_groups_filtered_total", "Prompt groups not trained: all rewards equal.",
       CountKind::kRunningTotal},
      {"duplicates_dropped", "moerl_duplicates_dropped_total",
       "Experience records dropped as duplicates (a redelivered task done twice).", CountKind::kRunningTotal},
      {"stale_dropped", "moerl_stale_dropped_total", "Experience records dropped as too stale.",
       CountKind::kRunningTotal},
      {"tasks_requeued", "moerl_tasks_requeued_total", "Tasks handed back or re-delivered after a lost lease.",
       CountKind::kRunningTotal},
      {"dead_lettered", "moerl_tasks_dead_lettered_total", "Tasks dead-lettered after too many deliveries.",
       CountKind::kRunningTotal},
      {"records_quarantined", "moerl_records_quarantined_total",
       "Experience records refused at the trainer boundary (bad CRC, out-of-vocabulary token, non-finite "
       "logprob, ...) and moved to the quarantine stream.",
       CountKind::kRunningTotal},
      {"records_dead_lineage", "moerl_records_dead_lineage_total",
       "Experience records generated with weights of a trainer life that ended after its last checkpoint; "
       "dropped, their tasks enqueued again.",
       CountKind::kRunningTotal},
  };
  return f;
}

std::vector<std::pair<std::string, double>> row_scalars(const nlohmann::json& row) {
  std::vector<std::pair<std::string, double>> out;
  const std::string phase = row.contains("phase") && row["phase"].is_string() ? row["phase"].get<std::string>() : "";
  for (auto it = row.begin(); it != row.end(); ++it) {
    collect(it.value(), phase.empty() ? it.key() : phase + "/" + it.key(), out);
  }
  return out;
}

int64_t row_step(const nlohmann::json& row) {
  for (const char* k : {"step", "sft_step"}) {
    if (row.contains(k) && row[k].is_number_integer()) return row[k].get<int64_t>();
  }
  return -1;
}

RunMetrics::RunMetrics(const std::string& run_dir, metrics::JsonlMode mode, const MetricsSection& section,
                       metrics::Registry& registry)
    : jsonl_((std::filesystem::path(run_dir) / "metrics.jsonl").string(), mode),
      registry_(registry),
      last_totals_(counter_fields().size(), 0.0) {
  if (section.tensorboard) {
    tb_ = std::make_unique<tb::EventWriter>((std::filesystem::path(run_dir) / "tb").string());
    MOERL_LOG(INFO) << "metrics: TensorBoard events in " << tb_->path() << " (tensorboard --logdir "
                    << (std::filesystem::path(run_dir) / "tb").string() << ")";
  }
}

void RunMetrics::write(const nlohmann::json& row) {
  jsonl_.write(row);
  if (tb_) tb_->add_scalars(row_step(row), row_scalars(row));
  mirror(row);
}

void RunMetrics::mirror(const nlohmann::json& row) {
  const std::vector<CounterField>& counters = counter_fields();
  for (size_t i = 0; i < counters.size(); ++i) {
    const CounterField& c = counters[i];
    if (!row.contains(c.field) || !row[c.field].is_number()) continue;
    const double v = row[c.field].get<double>();
    double add = v;
    if (c.kind == CountKind::kRunningTotal) {
      add = v - last_totals_[i];
      last_totals_[i] = v;
    }
    if (add > 0 && std::isfinite(add)) registry_.counter(c.name, c.help).inc(add);
  }
  for (const auto& [tag, v] : row_scalars(row)) {
    const std::string field = tag.substr(tag.find('/') + 1);
    bool counted = false;
    for (const CounterField& c : counters) counted = counted || field == c.field;
    if (counted) continue;
    auto h = field_help().find(field);
    const std::string name = prometheus_name(tag);
    try {
      registry_.gauge(name, h != field_help().end() ? h->second : "A metrics.jsonl field, newest row.").set(v);
    } catch (const Error& e) {
      // Two fields whose names sanitise alike (a service's extra_logs "a-b" and "a_b"): the
      // first keeps the series; metrics.jsonl and TensorBoard still have both.
      if (skipped_.insert(name).second) MOERL_LOG(WARN) << "metrics: " << tag << " not exported: " << e.what();
    }
  }
}

}  // namespace moerl::job
