#include "train/policy_trainer.h"

#include <cmath>

#include "base/check.h"
#include "base/deadline.h"
#include "base/error.h"
#include "base/log.h"
#include "rl/advantages.h"
#include "rl/aux_losses.h"
#include "rl/kl.h"
#include "rl/policy_loss.h"
#include "rl/value_loss.h"
#include "train/chunked_logprobs.h"
#include "train/dp_sync.h"
#include "train/packed_batch.h"

namespace moerl::train {

namespace {

// The policy's forwards replay the rollout's routing when the batch carries it; the frozen
// reference routes live (it is another policy: the rollout's choices are not its own).
enum class Replay { kBatch, kNone };
// With a logprob chunk the forward makes no logits: score_tokens works from the hidden states.
// Activation checkpointing acts in the gradient passes only (Model::forward ignores it
// under NoGradGuard).
model::ForwardOutput run_forward(model::Model& m, const PackedBatch& b, const TrainerConfig& c,
                                 Replay replay = Replay::kBatch) {
  return m.forward({.input_ids = b.input_ids_BT,
                    .attention_mask = b.attention_mask_BT,
                    .routing_replay = replay == Replay::kBatch ? b.routing_replay_BTLK : at::Tensor(),
                    .skip_logits = c.logprob_chunk > 0,
                    .checkpointing = c.activation_checkpointing});
}

// mb's next-token logprobs under `s` (and their distributions' entropy when asked,
// differentiable only with entropy_grad), laid out as token_logprobs: from the full logits, or
// from the hidden states a chunk of response positions at a time (train/chunked_logprobs.h).
TokenStats score_tokens(const model::Model& m, const model::ForwardOutput& out, const PackedBatch& mb,
                        const model::SamplingConfig& s, int64_t chunk, bool entropy, bool entropy_grad = false) {
  if (chunk > 0) {
    TokenStats t = chunked_token_stats(out.hidden_BTH, m.lm_head(), mb.input_ids_BT, mb.response_mask_BT, s, chunk,
                                       entropy);
    if (entropy && !entropy_grad) t.entropy_BT = t.entropy_BT.detach();
    return t;
  }
  const at::Tensor logits = model::sampling_logits(out.logits_BTV, s);
  TokenStats t{.logp_BT = token_logprobs(logits, mb.input_ids_BT)};
  if (entropy && entropy_grad) {
    t.entropy_BT = rl::token_entropy(shifted_logits(logits));
  } else if (entropy) {  // logged, outside the graph
    at::NoGradGuard no_grad;
    t.entropy_BT = rl::token_entropy(shifted_logits(logits.detach()));
  }
  return t;
}

void router_inputs(const model::ForwardOutput& out, const PackedBatch& mb, rl::PolicyLossInputs& in,
                   int64_t num_experts) {
  for (const auto& r : out.routing) {
    in.router_logits_TE.push_back(r.router_logits_TE);
    in.topk_idx_TK.push_back(r.topk_idx_TK);
  }
  in.router_token_mask_T = mb.attention_mask_BT.reshape({-1}).to(at::kFloat);
  in.num_experts = num_experts;
}

}  // namespace

PolicyTrainer::PolicyTrainer(model::Model& policy, model::Model* reference, TrainerConfig cfg,
                             int64_t pad_id)
    : policy_(policy), reference_(reference), cfg_(std::move(cfg)), pad_id_(pad_id) {
  cfg_.loss.validate();
  int64_t H = policy_.config().hidden_size;
  at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat).device(policy_.device());
  value_w_1H_ = at::zeros({1, H}, f32).set_requires_grad(true);
  value_b_1 = at::zeros({1}, f32).set_requires_grad(true);
  std::map<std::string, at::Tensor> params = policy_.params();
  if (cfg_.loss.uses_critic()) {
    params["value_head.weight"] = value_w_1H_;
    params["value_head.bias"] = value_b_1;
  }
  trained_ = params;
  opt_ = std::make_unique<AdamW>(std::move(params), cfg_.adamw);
}

double PolicyTrainer::clip_gradients() {
  if (!dp_) return opt_->clip_grad_norm(cfg_.max_grad_norm);
  return dp_->sync_gradients(trained_, cfg_.max_grad_norm);
}

std::map<std::string, at::Tensor> PolicyTrainer::value_head() const {
  return {{"value_head.weight", value_w_1H_}, {"value_head.bias", value_b_1}};
}

void PolicyTrainer::load_value_head(const std::map<std::string, at::Tensor>& tensors) {
  at::NoGradGuard no_grad;
  for (auto& [name, dst] : value_head()) {
    auto it = tensors.find(name);
    if (it == tensors.end()) throw Error("value head: missing '" + name + "'", "the checkpoint has no critic");
    const_cast<at::Tensor&>(dst).copy_(it->second.reshape(dst.sizes()));
  }
}

at::Tensor PolicyTrainer::advantages(const PackedBatch& b, const at::Tensor& old_values_BT,
                                     const at::Tensor& ref_logp_BT, const at::Tensor& old_logp_BT,
                                     int64_t group_size) {
  const rl::LossConfig& lc = cfg_.loss;
  rl::AdvantageInputs in;
  in.rewards_B = b.rewards_B.to(at::kFloat);
  in.mask_BL = b.response_mask_BT;
  in.values_BL = old_values_BT;
  if (lc.kl_coef > 0 && lc.kl_in == rl::KlPlacement::kReward) {
    in.kl_BL = rl::kl_penalty(old_logp_BT, ref_logp_BT, lc.kl_estimator);
  }
  in.group_size = group_size;
  in.max_new_tokens = cfg_.max_new_tokens;
  if (dp_) in.sum_over_ranks = [this](const std::vector<double>& v) { return dp_->sum(v); };
  rl::Advantages a = rl::compute_advantages(in, lc);
  returns_BT_ = a.returns_BL;
  return a.advantages_BL;
}

// What every update of one RL step reads: the packed batch and the passes made before them.
struct PolicyTrainer::StepInputs {
  PackedBatch b;
  std::vector<int64_t> lengths;  // each row's tokens (micro-batch planning)
  at::Tensor old_logp, old_values, ref_logp, adv;  // [B,T]; ref_logp undefined without KL
  bool old_from_grad_pass = false;  // one update: pi_old is the gradient pass's own logprobs
};

PolicyTrainer::BatchCounts PolicyTrainer::global_counts(const PackedBatch& b) const {
  BatchCounts c{rl::LossNorm::from_mask(b.response_mask_BT, cfg_.max_new_tokens),
                b.attention_mask_BT.sum().item<double>()};
  if (dp_) {
    // The objective is the global batch's: each rank's loss is its sum over the GLOBAL counts.
    // Gradients are then averaged over the R ranks, so the counts here are the global ones / R.
    std::vector<double> mean = dp_->mean({c.norm.num_tokens, c.norm.num_seqs, c.routed_tokens});
    c.norm.num_tokens = mean[0];
    c.norm.num_seqs = mean[1];
    c.routed_tokens = mean[2];
  }
  c.routed_tokens = std::max(1.0, c.routed_tokens);
  return c;
}

MicroBatchPlan PolicyTrainer::plan(const PackedBatch& b, const std::vector<int64_t>& lengths, int64_t begin,
                                   int64_t end) {
  const int64_t budget = cfg_.max_tokens_per_micro_batch;
  MicroBatchPlan p = plan_micro_batches(lengths, begin, end, b.max_len, {cfg_.micro_batch_size, budget});
  if (p.longest_over_budget > 0 && !warned_over_budget_) {
    warned_over_budget_ = true;
    MOERL_LOG(WARN) << "trainer: a row of " << p.longest_over_budget << " tokens exceeds train.max_tokens_per_micro_batch = "
                    << budget << "; such rows go alone in a micro-batch (raise the budget to at least the longest "
                    << "prompt + response to bound memory by it)";
  }
  // NOTE: without a budget every rank holds as many rows and plans as many micro-batches.
  if (dp_ && budget > 0) {
    const double most = dp_->max({static_cast<double>(p.micro_batches.size())})[0];
    pad_plan(p, static_cast<int64_t>(most));
  }
  return p;
}

void PolicyTrainer::filler_pass(model::Model& m, bool backward) {
  const auto ids = at::TensorOptions().dtype(at::kLong).device(m.device());
  PackedBatch f;
  f.input_ids_BT = at::full({1, 1}, pad_id_, ids);
  f.attention_mask_BT = at::ones({1, 1}, ids);
  TrainerConfig c = cfg_;
  c.logprob_chunk = 1;  // no logits
  model::ForwardOutput out = run_forward(m, f, c, Replay::kNone);
  if (!backward) return;
  at::Tensor zero = out.hidden_BTH.sum() * 0;
  for (const auto& r : out.routing) zero = zero + r.router_logits_TE.sum() * 0;
  zero.backward();
}

bool PolicyTrainer::apply_update(double grad_norm, double lr, StepStats& st) {
  if (std::isfinite(grad_norm)) {
    nonfinite_in_a_row_ = 0;
    opt_->step(lr);
    ++st.optimizer_steps;
    st.grad_norm += grad_norm;
    return true;
  }
  // NOTE: NaN > max_norm is false, so clipping would pass a NaN gradient to AdamW, which
  // writes it into the weights and moments for good. Under data parallelism the norm is
  // global, so every rank skips together.
  ++st.skipped_nonfinite;
  ++nonfinite_in_a_row_;
  MOERL_LOG(WARN) << "trainer: step " << step_ << ": gradient norm is " << grad_norm
                     << "; update skipped (" << nonfinite_in_a_row_ << " in a row)";
  if (nonfinite_in_a_row_ >= cfg_.max_nonfinite_steps) {
    throw Error("trainer: " + std::to_string(nonfinite_in_a_row_) +
                    " optimizer updates in a row had a non-finite gradient norm (last at RL step " +
                    std::to_string(step_) + ")",
                "the run diverged or its data is bad: lower train.lr, check the rewards and logprobs of the "
                "experience, or resume from an earlier checkpoint (train.max_nonfinite_steps sets the limit)");
  }
  return false;
}

void PolicyTrainer::update(const StepInputs& si, int64_t begin, int64_t end, StepStats& st) {
  const rl::LossConfig& lc = cfg_.loss;
  PackedBatch mini = slice_rows(si.b, begin, end);
  const BatchCounts counts = global_counts(mini);
  opt_->zero_grad();
  double loss_sum = 0, pg = 0, value = 0, kl = 0, aux = 0;
  for (const MicroBatch& part : plan(si.b, si.lengths, begin, end).micro_batches) {
    if (part.filler()) {
      filler_pass(policy_, /*backward=*/true);
      continue;
    }
    PackedBatch mb = take_rows(si.b, part);
    model::ForwardOutput out = run_forward(policy_, mb, cfg_);
    rl::PolicyLossInputs in;
    TokenStats tokens = score_tokens(policy_, out, mb, cfg_.sampling, cfg_.logprob_chunk, /*entropy=*/true,
                                     /*entropy_grad=*/lc.entropy_coef > 0);
    in.logp_BL = tokens.logp_BT;
    if (si.old_from_grad_pass) put_rows(si.old_logp, part, in.logp_BL.detach());
    in.old_logp_BL = take_rows(si.old_logp, part);
    in.behav_logp_BL = mb.behav_logp_BT;  // read by the correction, and by the mismatch metrics
    if (si.ref_logp.defined()) in.ref_logp_BL = take_rows(si.ref_logp, part);
    in.advantages_BL = take_rows(si.adv, part);
    in.mask_BL = mb.response_mask_BT;
    in.entropy_BL = tokens.entropy_BT;
    router_inputs(out, mb, in, policy_.config().num_experts);
    // Router terms weigh each micro-batch by its share of the (global) routed tokens.
    in.aux_scale = mb.attention_mask_BT.sum().item<double>() / counts.routed_tokens;
    in.norm = counts.norm;
    rl::PolicyLoss pl = rl::compute_policy_loss(in, lc);
    at::Tensor loss = pl.loss;
    const auto& m = pl.metrics;
    if (lc.uses_critic()) {
      rl::ValueLossInputs vin{shifted_values(out.hidden_BTH, value_w_1H_, value_b_1),
                              take_rows(si.old_values, part), take_rows(returns_BT_, part), mb.response_mask_BT,
                              counts.norm};
      rl::ValueLoss vl = rl::compute_value_loss(vin, lc);
      loss = loss + vl.loss;
      value += vl.metrics.value_loss;
    }
    loss.backward();
    const double w = m.num_tokens;
    loss_sum += loss.item<double>();
    pg += m.pg_loss;
    kl += m.kl_loss;
    aux += m.lb_loss * in.aux_scale;
    st.entropy += m.entropy * w;
    st.clip_frac += m.clip_frac * w;
    st.approx_kl += m.approx_kl * w;
    st.behav_weight += m.behav_weight_mean * w;
    st.behav_capped_frac += m.behav_capped_frac * w;
    st.mismatch_abs += m.mismatch_abs * w;
    st.mismatch_kl += m.mismatch_kl * w;
    st.num_tokens += static_cast<int64_t>(w);
  }
  st.loss += loss_sum, st.pg_loss += pg, st.value_loss += value, st.kl += kl, st.aux_loss += aux;
  st.lr = cfg_.schedule.at(step_);
  apply_update(clip_gradients(), st.lr, st);
}

StepStats PolicyTrainer::train_step(const std::vector<runtime::ExperienceRecord>& records) {
  double t0 = now_seconds();
  const rl::LossConfig& lc = cfg_.loss;
  if (lc.kl_coef > 0 && reference_ == nullptr) {
    throw Error("trainer: algorithm.kl_coef=" + std::to_string(lc.kl_coef) + " needs a reference policy",
                "set algorithm.kl_coef = 0 or give the trainer a frozen reference (set_reference)");
  }
  std::vector<const runtime::Sample*> rows;
  int64_t group_size = records.empty() ? 0 : static_cast<int64_t>(records.front().samples.size());
  for (const auto& r : records) {
    if (static_cast<int64_t>(r.samples.size()) != group_size) {
      throw Error("trainer: task " + r.task_id + " has " + std::to_string(r.samples.size()) +
                      " samples, others " + std::to_string(group_size),
                  "every prompt group in a batch must have algorithm.group_size samples");
    }
    for (const auto& s : r.samples) rows.push_back(&s);
  }
  StepInputs si;
  const bool replay = lc.routing_replay == rl::RoutingReplay::kRollout;
  const RoutingShape routing{policy_.num_moe_layers(), policy_.arch().router_config(policy_.config()).top_k};
  si.b = to_device(pack_samples(rows, pad_id_, replay ? &routing : nullptr), policy_.device());
  si.lengths = row_lengths(si.b);
  const PackedBatch& b = si.b;
  const int64_t B = b.num_rows;
  const int64_t mini_rows = cfg_.ppo_mini_batch_size > 0 ? std::min(B, cfg_.ppo_mini_batch_size) : B;
  const int64_t num_minis = (B + std::max<int64_t>(1, mini_rows) - 1) / std::max<int64_t>(1, mini_rows);
  const at::Tensor& mask = b.response_mask_BT;

  // Passes without gradients: pi_old (proximal), the critic's old values, the reference.
  // pi_old needs its own forward when something reads it before the gradient pass (critic
  // values and KL-in-reward enter the advantages) or after an update (several updates).
  const bool old_before_grad = lc.uses_critic() || cfg_.ppo_epochs * num_minis > 1 ||
                               (lc.kl_coef > 0 && lc.kl_in == rl::KlPlacement::kReward);
  // Otherwise, with one optimizer step per batch, pi_old is the policy of the gradient pass
  // itself: its logprobs are that pass's, detached (bit for bit what a separate pass gives).
  si.old_from_grad_pass = !old_before_grad;
  si.old_logp = at::zeros_like(mask);
  si.old_values = at::zeros_like(mask);
  if (lc.kl_coef > 0) si.ref_logp = at::zeros_like(mask);
  if (old_before_grad || si.ref_logp.defined()) {
    at::NoGradGuard no_grad;
    for (const MicroBatch& part : plan(b, si.lengths, 0, B).micro_batches) {
      if (part.filler()) {
        if (old_before_grad) filler_pass(policy_, /*backward=*/false);
        if (si.ref_logp.defined()) filler_pass(*reference_, /*backward=*/false);
        continue;
      }
      PackedBatch mb = take_rows(b, part);
      if (old_before_grad) {
        model::ForwardOutput out = run_forward(policy_, mb, cfg_);
        put_rows(si.old_logp, part, score_tokens(policy_, out, mb, cfg_.sampling, cfg_.logprob_chunk, false).logp_BT);
        if (lc.uses_critic()) put_rows(si.old_values, part, shifted_values(out.hidden_BTH, value_w_1H_, value_b_1));
      }
      if (si.ref_logp.defined()) {
        model::ForwardOutput ref = run_forward(*reference_, mb, cfg_, Replay::kNone);
        put_rows(si.ref_logp, part, score_tokens(*reference_, ref, mb, cfg_.sampling, cfg_.logprob_chunk, false).logp_BT);
      }
    }
  }
  si.adv = advantages(b, si.old_values, si.ref_logp, old_before_grad ? si.old_logp : b.behav_logp_BT, group_size);

  StepStats st;
  for (int64_t epoch = 0; epoch < cfg_.ppo_epochs; ++epoch) {
    for (int64_t begin = 0; begin < B; begin += mini_rows) update(si, begin, std::min(B, begin + mini_rows), st);
  }
  opt_->zero_grad();
  ++step_;
  const double updates = static_cast<double>(std::max<int64_t>(1, cfg_.ppo_epochs * num_minis));
  st.loss /= updates, st.pg_loss /= updates, st.value_loss /= updates, st.kl /= updates, st.aux_loss /= updates;
  st.grad_norm /= static_cast<double>(std::max<int64_t>(1, st.optimizer_steps));
  double n = std::max<double>(1, static_cast<double>(st.num_tokens));
  st.entropy /= n;
  st.clip_frac /= n;
  st.approx_kl /= n;
  st.behav_weight /= n;
  st.behav_capped_frac /= n;
  st.mismatch_abs /= n;
  st.mismatch_kl /= n;
  st.num_tokens = mask.sum().item<int64_t>();
  st.num_samples = B;
  // Reward mean and std in double, in sample order: a sum of float rewards is exact in double
  // (24-bit mantissas, far fewer than 2^29 samples), so the figures do not depend on how a
  // CPU's vectorised reduction orders a float sum.
  double reward_sum = 0, reward_sq = 0;
  for (const runtime::Sample* s : rows) reward_sum += static_cast<double>(s->reward);
  st.reward_mean = reward_sum / static_cast<double>(std::max<int64_t>(1, B));
  for (const runtime::Sample* s : rows) {
    const double d = static_cast<double>(s->reward) - st.reward_mean;
    reward_sq += d * d;
  }
  st.reward_std = B > 1 ? std::sqrt(reward_sq / static_cast<double>(B - 1)) : 0.0;
  st.response_len = mask.sum().item<double>() / static_cast<double>(B);
  st.seconds = now_seconds() - t0;
  return st;
}

StepStats PolicyTrainer::sft_step(const std::vector<runtime::Sample>& samples, double lr) {
  double t0 = now_seconds();
  std::vector<const runtime::Sample*> rows;
  for (const auto& s : samples) rows.push_back(&s);
  PackedBatch b = to_device(pack_samples(rows, pad_id_), policy_.device());
  const int64_t B = b.num_rows;
  double total = std::max(1.0, b.response_mask_BT.sum().item<double>());
  StepStats st;
  opt_->zero_grad();
  for (const MicroBatch& part : plan(b, row_lengths(b), 0, B).micro_batches) {
    if (part.filler()) {
      filler_pass(policy_, /*backward=*/true);
      continue;
    }
    PackedBatch mb = take_rows(b, part);
    model::ForwardOutput out = run_forward(policy_, mb, cfg_);
    const TokenStats tokens = score_tokens(policy_, out, mb, model::SamplingConfig{}, cfg_.logprob_chunk, false);
    at::Tensor nll = -(tokens.logp_BT * mb.response_mask_BT).sum() / total;
    rl::PolicyLossInputs in;  // only the router terms, to keep experts balanced from the start
    router_inputs(out, mb, in, policy_.config().num_experts);
    double scale = mb.attention_mask_BT.sum().item<double>() / std::max(1.0, b.attention_mask_BT.sum().item<double>());
    at::Tensor aux = rl::load_balancing_loss(in.router_logits_TE, in.topk_idx_TK, in.num_experts,
                                             in.router_token_mask_T);
    at::Tensor loss = nll + cfg_.loss.aux_loss_coef * scale * aux;
    loss.backward();
    st.loss += nll.item<double>();
    st.aux_loss += aux.item<double>() * scale;
  }
  st.lr = lr;
  const double grad_norm = clip_gradients();
  apply_update(grad_norm, lr, st);
  st.grad_norm = grad_norm;
  opt_->zero_grad();
  st.num_samples = B;
  st.num_tokens = static_cast<int64_t>(total);
  st.seconds = now_seconds() - t0;
  return st;
}

}  // namespace moerl::train
