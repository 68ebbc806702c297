#include "job/ep_join.h"

#include <algorithm>
#include <filesystem>
#include <string>

#include "base/env.h"
#include "base/error.h"
#include "base/log.h"
#include "io/hf_config.h"
#include "rollout/evaluate.h"

namespace moerl::job {

namespace {

constexpr double kEpTimeoutS = 120;  // every collective wait of an EP job

}  // namespace

EpJoin join_ep(const JobConfig& cfg) {
  const env::Rendezvous rdv = env::rendezvous();
  const std::string R = std::to_string(cfg.ep_size);
  if (cfg.ep_size == 1) {
    if (rdv.world_size > 1) {
      throw Error("train: WORLD_SIZE=" + std::to_string(rdv.world_size) +
                      " but ep.size=1: every rank would run the whole job into the same run dir",
                  "set [ep] size = " + std::to_string(rdv.world_size) + " (--set ep.size=" +
                      std::to_string(rdv.world_size) + "), or run `moerl train` without `moerl launch`");
    }
    return {};
  }
  if (rdv.world_size != cfg.ep_size) {
    throw Error("train: ep.size=" + R + " needs " + R + " ranks but WORLD_SIZE=" + std::to_string(rdv.world_size),
                "start one process per EP rank: moerl launch -n " + R + " -- moerl train CONFIG.toml ...");
  }
  if (cfg.ep_backend == "loopback") {
    throw Error("train: ep.size=" + R + " with ep.backend=\"loopback\" (one rank only)",
                "set [ep] backend = \"fabric\" (or \"alltoall\", the c10d baseline)");
  }
  auto divisible = [&](const char* key, int64_t v) {
    if (v % cfg.ep_size != 0) {
      throw Error("train: " + std::string(key) + "=" + std::to_string(v) + " must be a multiple of ep.size=" + R +
                      " (each rank takes an equal share, and the ranks' forward calls must match)",
                  std::string("set ") + key + " to a multiple of " + R);
    }
  };
  divisible("rollout.prompts_per_step", cfg.rollout.prompts_per_step);
  if (cfg.train.sft_steps > 0) divisible("train.sft_batch_size", cfg.train.sft_batch_size);
  divisible("train.eval_prompts", cfg.train.eval_prompts);
  io::HfConfig arch = cfg.model.init == "random"
                          ? cfg.model.arch
                          : io::HfConfig::load((std::filesystem::path(cfg.model.init) / "config.json").string());
  // Buffers for the largest forward: rows of a micro-batch, a rollout or an eval batch,
  // each at most max_position_embeddings tokens.
  const int64_t rl_rows = cfg.rollout.prompts_per_step / cfg.ep_size * cfg.loss.group_size;
  const int64_t mb = cfg.train.trainer.micro_batch_size;
  int64_t rows = std::max({std::min(mb, rl_rows), rl_rows,
                           std::min<int64_t>(rollout::EvalConfig{}.batch_size, cfg.train.eval_prompts / cfg.ep_size)});
  if (cfg.train.sft_steps > 0) rows = std::max(rows, std::min(mb, cfg.train.sft_batch_size / cfg.ep_size));
  ep::Config ec;
  ec.backend = ep::parse_backend(cfg.ep_backend);
  ec.mode = ep::Mode::kNormal;
  ec.hidden = arch.hidden_size;
  ec.max_topk = arch.num_experts_per_tok;
  ec.max_tokens_per_rank = rows * arch.max_position_embeddings;
  ec.timeout_s = kEpTimeoutS;
  EpJoin j;
  j.group = ep::make_group(ec, arch.num_experts);
  j.dp = train::DataParallel::join(kEpTimeoutS);
  const int rank = j.dp->rank(), world = j.dp->world_size();
  MOERL_LOG(INFO) << "train: rank " << rank << " of " << world << ", ep backend " << cfg.ep_backend << ", experts "
                  << rank * arch.num_experts / world << ".." << (rank + 1) * arch.num_experts / world - 1
                  << ", buffers for " << ec.max_tokens_per_rank << " tokens";
  return j;
}

}  // namespace moerl::job
