// `moerl trainer CONFIG.toml [--set key=value ...] [--run-dir DIR] [--fresh] [--no-plot]`: the
// trainer role of the asynchronous job (job/roles.h) over the queue [runtime] names.
#include <cstdio>
#include <filesystem>

#include "base/env.h"
#include "base/error.h"
#include "base/files.h"
#include "cli/command.h"
#include "job/roles.h"

namespace moerl::cli {

static int run_trainer_cmd(Args& args) {
  if (args.flag("--help")) {
    std::printf(
        "usage: moerl trainer CONFIG.toml [--set key=value ...] [--run-dir DIR] [--fresh] [--no-plot]\n"
        "  The trainer role: tops up the task queue ([runtime] queue_url), trains on experience\n"
        "  within runtime.max_staleness, publishes weight versions to the store, checkpoints the\n"
        "  buffer and queue cursor. Rollout workers: `moerl rollout CONFIG.toml` (same config,\n"
        "  same --run-dir or [store] uri). A run dir holding a checkpoint resumes unless --fresh,\n"
        "  which removes the run dir and, once this trainer holds the namespace's trainer lease,\n"
        "  the earlier run's tasks and experience in runtime.namespace.\n"
        "  A trainer group: `moerl launch -n N -- moerl trainer CONFIG --set ep.size=N` (experts\n"
        "  sharded over N ranks, one consumer, one checkpoint, one weight lineage).\n");
    return 0;
  }
  std::vector<std::string> overrides = args.values("--set");
  std::optional<std::string> run_dir = args.value("--run-dir");
  bool fresh = args.flag("--fresh");
  bool no_plot = args.flag("--no-plot");
  std::string config = args.positional(0, "CONFIG.toml");
  args.finish();
  job::JobConfig cfg = job::JobConfig::load(config, overrides);
  job::JobOptions opts;
  opts.run_dir = run_dir.value_or("runs/" + std::filesystem::path(config).stem().string());
  if (fresh && env::rendezvous().rank == 0) remove_tree(opts.run_dir);
  opts.fresh = fresh;
  opts.plot = !no_plot;
  nlohmann::json summary = job::run_trainer_role(cfg, opts);
  std::printf("%s\n", summary.dump(2).c_str());
  return 0;
}

MOERL_COMMAND("trainer", "trainer role of the async job (queue -> train -> publish weight versions)", run_trainer_cmd);

}  // namespace moerl::cli
