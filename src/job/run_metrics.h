// Where a run's metrics go. Every row of metrics.jsonl (one per SFT or RL step) is also, when
// [metrics] asks for it, a TensorBoard event (RUN_DIR/tb/, every numeric field as a scalar) and
// the newest value of the process's Prometheus series (served at /metrics by
// job/metrics_endpoint.h). Rank 0 of the trainer owns one; the rollout role has no rows.
// [metrics] is job/metrics_config.h.
//
//   RunMetrics m(run_dir, metrics::JsonlMode::kTruncate, cfg.metrics);
//   m.write({{"phase", "rl"}, {"step", 3}, {"reward", 0.42}});   // jsonl + tb + gauges
// TensorBoard tags are PHASE/FIELD (nested objects joined by '/': rl/reward_extra/format), at
// the row's step (sft rows: sft_step). Prometheus: moerl_PHASE_FIELD gauges (rl/loss ->
// moerl_rl_loss), except the counts in counter_fields() (moerl_..._total counters).
// Not thread-safe: the trainer thread writes. Failure: moerl::Error(kIo) from the files.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/jsonl.h"
#include "base/metrics.h"
#include "io/tb/event_writer.h"
#include "job/metrics_config.h"

namespace moerl::job {

// A row field mirrored as a Prometheus counter: per step (added each row) or a running total
// kept by the run (the counter follows it).
enum class CountKind { kPerStep, kRunningTotal };
struct CounterField {
  const char* field;
  const char* name;
  const char* help;
  CountKind kind;
};
const std::vector<CounterField>& counter_fields();

// Every numeric leaf of a row as (PHASE/path/to/field, value), in the row's order; strings,
// booleans and nulls are left out.
std::vector<std::pair<std::string, double>> row_scalars(const nlohmann::json& row);
// The TensorBoard step of a row: "step", else "sft_step", else -1.
int64_t row_step(const nlohmann::json& row);

class RunMetrics {
 public:
  // metrics.jsonl in run_dir (appended or truncated); tb/ there when section.tensorboard;
  // gauges and counters in `registry`.
  RunMetrics(const std::string& run_dir, metrics::JsonlMode mode, const MetricsSection& section,
             metrics::Registry& registry = metrics::default_registry());
  void write(const nlohmann::json& row);
  const std::string& path() const { return jsonl_.path(); }
  // The event file, or "" without TensorBoard.
  std::string tensorboard_path() const { return tb_ ? tb_->path() : ""; }

 private:
  void mirror(const nlohmann::json& row);

  metrics::JsonlWriter jsonl_;
  std::unique_ptr<tb::EventWriter> tb_;
  metrics::Registry& registry_;
  std::vector<double> last_totals_;  // per counter_fields() entry: the running total seen last
  std::set<std::string> skipped_;    // series names that could not be exported (warned once)
};

}  // namespace moerl::job
