// `moerl train CONFIG.toml [--set key=value ...] [--run-dir DIR] [--fresh] [--no-plot]`:
// the main job (job/roles.h). A run dir holding a checkpoint resumes unless --fresh.
#include <cstdio>
#include <filesystem>

#include "base/files.h"
#include "base/env.h"
#include "base/error.h"
#include "cli/command.h"
#include "job/roles.h"

namespace moerl::cli {

static int run_train(Args& args) {
  if (args.flag("--help")) {
    std::printf(
        "usage: moerl train CONFIG.toml [--set key=value ...] [--run-dir DIR] [--fresh] [--no-plot]\n"
        "                   [--stop-after-step N]\n"
        "                   [--mode sync|async]\n"
        "  Runs the job: SFT warm start, RL (GRPO/PPO), evaluation; writes metrics.jsonl,\n"
        "  summary.json, plot.png, config.toml and checkpoints into the run dir (default\n"
        "  runs/<config name>). An existing checkpoint there is resumed unless --fresh, which removes\n"
        "  the run dir and, async over Redis, the earlier run's tasks and experience in\n"
        "  runtime.namespace (once this trainer holds the namespace's trainer lease).\n"
        "  --mode (default: [runtime] mode) async runs the trainer and rollout.num_workers workers\n"
        "  (threads; local `moerl rollout` processes when runtime.queue_url is redis://).\n"
        "  Expert parallel ([ep] size = N, backend = \"fabric\"): run under `moerl launch -n N -- moerl\n"
        "  train ...`; each rank holds 1/N of the experts and a replica of the rest (sync mode).\n");
    return 0;
  }
  std::vector<std::string> overrides = args.values("--set");
  std::optional<std::string> run_dir = args.value("--run-dir");
  bool fresh = args.flag("--fresh");
  bool no_plot = args.flag("--no-plot");
  int64_t stop_after = args.integer("--stop-after-step", 0);
  std::optional<std::string> mode = args.value("--mode");
  std::string config = args.positional(0, "CONFIG.toml");
  args.finish();
  if (mode) overrides.push_back("runtime.mode=\"" + *mode + "\"");
  job::JobConfig cfg = job::JobConfig::load(config, overrides);
  job::JobOptions opts;
  opts.run_dir = run_dir.value_or("runs/" + std::filesystem::path(config).stem().string());
  // Under `moerl launch` every rank shares the run dir: only rank 0 clears it (the others
  // start after its rendezvous, which happens after this).
  if (fresh && env::rendezvous().rank == 0) remove_tree(opts.run_dir);
  opts.fresh = fresh;
  opts.plot = !no_plot;
  opts.stop_after_rl_steps = stop_after;
  nlohmann::json summary = job::run_job(cfg, opts);
  std::printf("%s\n", summary.dump(2).c_str());
  return 0;
}

MOERL_COMMAND("train", "run the RL job: SFT warm start, GRPO/PPO, evaluation, checkpoints", run_train);

}  // namespace moerl::cli
