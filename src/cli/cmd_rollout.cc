// `moerl rollout CONFIG.toml [--set key=value ...] [--run-dir DIR] [--worker-id ID]
// [--max-tasks N] [--threads N]`: one rollout worker process (rollout/worker.h). SIGTERM or a
// Spot notice drains it: unfinished tasks are handed back, it exits 0.
#include <cstdio>
#include <filesystem>

#include "cli/command.h"
#include "job/roles.h"
#include "runtime/worker_id.h"

namespace moerl::cli {

static int run_rollout_cmd(Args& args) {
  if (args.flag("--help")) {
    std::printf(
        "usage: moerl rollout CONFIG.toml [--set key=value ...] [--run-dir DIR] [--worker-id ID]\n"
        "                     [--max-tasks N] [--threads 1]\n"
        "  A rollout worker: leases prompt groups from [runtime] queue_url, generates with the\n"
        "  newest published weight version (store: [store] uri or DIR/store), puts experience.\n"
        "  SIGTERM / Spot notice: drain within runtime.drain_seconds and exit 0.\n"
        "  --worker-id: unique per live worker; default $POD_NAME (else the hostname) + 6 random hex.\n"
        "  An instance of M ranks: `moerl launch -n M -- moerl rollout CONFIG --set rollout.ep_size=M`\n"
        "  (experts sharded over the ranks; rank 0 leases, puts and acks for all of them).\n");
    return 0;
  }
  std::vector<std::string> overrides = args.values("--set");
  std::optional<std::string> run_dir = args.value("--run-dir");
  job::RolloutRoleOptions o;
  // NOTE: not the PID: each pod is its own PID namespace, so every replica's moerl has the same one.
  std::optional<std::string> worker_id = args.value("--worker-id");
  if (worker_id) runtime::check_worker_id(*worker_id);
  // An instance of several ranks takes rank 0's (job/roles.h).
  o.worker_id = worker_id.value_or(runtime::default_worker_id());
  o.max_tasks = args.integer("--max-tasks", 0);
  o.intra_op_threads = static_cast<int>(args.integer("--threads", 1));
  std::string config = args.positional(0, "CONFIG.toml");
  args.finish();
  job::JobConfig cfg = job::JobConfig::load(config, overrides);
  o.run_dir = run_dir.value_or("runs/" + std::filesystem::path(config).stem().string());
  return job::run_rollout_role(cfg, o);
}

MOERL_COMMAND("rollout", "rollout worker role of the async job (lease -> generate -> put)", run_rollout_cmd);

}  // namespace moerl::cli
