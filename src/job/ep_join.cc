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

// The arch the role builds (its num_experts, hidden size, top-k and context length).
io::HfConfig role_arch(const JobConfig& cfg) {
  return cfg.model.init == "random" ? cfg.model.arch
                                    : io::HfConfig::load((std::filesystem::path(cfg.model.init) / "config.json").string());
}

// Checks WORLD_SIZE against the role's configured size `key` = `size`; false on one rank.
bool several_ranks(const JobConfig& cfg, const char* role, const char* key, int64_t size, const std::string& start) {
  const env::Rendezvous rdv = env::rendezvous();
  const std::string R = std::to_string(size), W = std::to_string(rdv.world_size);
  if (size == 1) {
    if (rdv.world_size > 1) {
      throw Error(std::string(role) + ": WORLD_SIZE=" + W + " but " + key + "=1: every rank would run the whole " +
                      role + " on its own",
                  std::string("set ") + key + " = " + W + " (--set " + key + "=" + W + "), or run it without `moerl launch`");
    }
    return false;
  }
  if (rdv.world_size != size) {
    throw Error(std::string(role) + ": " + key + "=" + R + " needs " + R + " ranks but WORLD_SIZE=" + W,
                "start one process per rank: moerl launch -n " + R + " -- " + start);
  }
  if (cfg.ep_backend == "loopback") {
    throw Error(std::string(role) + ": " + key + "=" + R + " with ep.backend=\"loopback\" (one rank only)",
                "set [ep] backend = \"fabric\" (or \"alltoall\", the c10d baseline; on GPUs \"cuda_ipc\" or \"nccl\")");
  }
  return true;
}

std::shared_ptr<ep::Group> make_ep_group(const JobConfig& cfg, const io::HfConfig& arch, int64_t rows,
                                         const std::string& backend) {
  ep::Config ec;
  ec.backend = ep::parse_backend(backend);
  ec.mode = ep::Mode::kNormal;
  ec.hidden = arch.hidden_size;
  ec.max_topk = arch.num_experts_per_tok;
  // Buffers for the largest forward: `rows` rows of at most max_position_embeddings tokens.
  ec.max_tokens_per_rank = rows * arch.max_position_embeddings;
  ec.timeout_s = cfg.ep_timeout_seconds;
  if (!cfg.ep_intra_backend.empty()) ec.intra_backend = ep::parse_backend(cfg.ep_intra_backend);
  ec.inter_backend = ep::parse_backend(cfg.ep_inter_backend);
  return ep::make_group(ec, arch.num_experts);
}

}  // namespace

EpJoin join_ep(const JobConfig& cfg) {
  if (!several_ranks(cfg, "trainer", "ep.size", cfg.ep_size, "moerl trainer CONFIG.toml (or moerl train)")) return {};
  const std::string R = std::to_string(cfg.ep_size);
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
  const io::HfConfig arch = role_arch(cfg);
  // The largest forward: rows of a micro-batch, a rollout or an eval batch.
  const int64_t rl_rows = cfg.rollout.prompts_per_step / cfg.ep_size * cfg.loss.group_size;
  const int64_t mb = cfg.train.trainer.micro_batch_size;
  int64_t rows = std::max({std::min(mb, rl_rows), rl_rows,
                           std::min<int64_t>(rollout::EvalConfig{}.batch_size, cfg.train.eval_prompts / cfg.ep_size)});
  if (cfg.train.sft_steps > 0) rows = std::max(rows, std::min(mb, cfg.train.sft_batch_size / cfg.ep_size));
  EpJoin j;
  j.group = make_ep_group(cfg, arch, rows, cfg.ep_backend);
  j.dp = train::DataParallel::join(cfg.ep_timeout_seconds);
  const int rank = j.dp->rank(), world = j.dp->world_size();
  MOERL_LOG(INFO) << "train: rank " << rank << " of " << world << ", ep backend " << cfg.ep_backend << ", experts "
                  << rank * arch.num_experts / world << ".." << (rank + 1) * arch.num_experts / world - 1;
  return j;
}

std::shared_ptr<ep::Group> rollout_ep_group(const JobConfig& cfg, const std::string& backend) {
  // A lease's units spread over the ranks, G rows each; a rank holds at least one row.
  const int64_t M = cfg.rollout.ep_size;
  const int64_t units = (cfg.runtime.tasks_per_lease + M - 1) / M;
  return make_ep_group(cfg, role_arch(cfg), std::max<int64_t>(1, units * cfg.loss.group_size), backend);
}

RolloutInstance join_rollout_instance(const JobConfig& cfg) {
  const int64_t M = cfg.rollout.ep_size;
  if (!several_ranks(cfg, "rollout", "rollout.ep_size", M, "moerl rollout CONFIG.toml")) return {};
  const io::HfConfig arch = role_arch(cfg);
  RolloutInstance i;
  i.ep = rollout_ep_group(cfg, cfg.ep_backend);
  i.control = ep::ControlGroup::join("instance", cfg.ep_timeout_seconds);
  const int rank = i.control->rank();
  MOERL_LOG(INFO) << "rollout: rank " << rank << " of an instance of " << M << ", ep backend " << cfg.ep_backend
                  << ", experts " << rank * arch.num_experts / M << ".." << (rank + 1) * arch.num_experts / M - 1;
  return i;
}

}  // namespace moerl::job
