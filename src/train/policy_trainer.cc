#include "train/policy_trainer.h"

#include <cmath>

#include "base/check.h"
#include "base/deadline.h"
#include "base/error.h"
#include "rl/advantages.h"
#include "rl/aux_losses.h"
#include "rl/kl.h"
#include "rl/policy_loss.h"
#include "rl/value_loss.h"
#include "train/dp_sync.h"
#include "train/packed_batch.h"

namespace moerl::train {

namespace {

model::ForwardOutput run_forward(model::Model& m, const PackedBatch& b) {
  return m.forward({.input_ids = b.input_ids_BT, .attention_mask = b.attention_mask_BT});
}

// Applies fn to row ranges [begin, end) of at most `rows` rows.
template <typename Fn>
void for_micro_batches(int64_t total, int64_t rows, Fn&& fn) {
  for (int64_t begin = 0; begin < total; begin += rows) fn(begin, std::min(total, begin + rows));
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
  if (cfg_.loss.kl_coef > 0 && reference_ == nullptr) {
    throw Error("trainer: algorithm.kl_coef=" + std::to_string(cfg_.loss.kl_coef) +
                    " needs a reference policy",
                "set algorithm.kl_coef = 0 or let the job keep a frozen reference copy");
  }
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
  const at::Tensor& mask = b.response_mask_BT;
  at::Tensor outcome_B = b.rewards_B.to(at::kFloat);
  bool kl_in_reward = lc.kl_coef > 0 && lc.kl_in == rl::KlPlacement::kReward;
  at::Tensor kl_BT;
  if (kl_in_reward) kl_BT = rl::kl_penalty(old_logp_BT, ref_logp_BT, lc.kl_estimator);
  if (lc.uses_critic()) {
    at::Tensor r_BT = rl::token_rewards(outcome_B, mask);
    if (kl_in_reward) r_BT = rl::fold_kl_into_rewards(r_BT, kl_BT, mask, lc.kl_coef);
    rl::Gae g = rl::gae(r_BT, old_values_BT * mask, mask, lc.gamma, lc.lambda);
    returns_BT_ = g.returns_BL;
    return lc.whiten_advantages ? rl::whiten(g.advantages_BL, mask) : g.advantages_BL;
  }
  if (kl_in_reward) outcome_B = rl::fold_kl_into_outcome(outcome_B, kl_BT, mask, lc.kl_coef);
  at::Tensor adv_NG = rl::group_advantages(outcome_B.reshape({-1, group_size}), lc.adv_estimator, lc.adv_eps);
  return rl::broadcast_to_tokens(adv_NG.reshape({-1}), mask);
}

StepStats PolicyTrainer::train_step(const std::vector<runtime::ExperienceRecord>& records) {
  double t0 = now_seconds();
  const rl::LossConfig& lc = cfg_.loss;
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
  PackedBatch b = to_device(pack_samples(rows, pad_id_), policy_.device());
  const int64_t B = b.num_rows, mb_rows = std::max<int64_t>(1, cfg_.micro_batch_size);
  const at::Tensor& mask = b.response_mask_BT;

  // Passes without gradients: pi_old (proximal), the critic's old values, the reference.
  // pi_old needs its own forward when something reads it before the gradient pass (critic
  // values and KL-in-reward enter the advantages) or after an update (ppo_epochs > 1).
  const bool old_before_grad = lc.uses_critic() || cfg_.ppo_epochs > 1 ||
                               (lc.kl_coef > 0 && lc.kl_in == rl::KlPlacement::kReward);
  const bool needs_old = old_before_grad || lc.behaviour_correction != rl::BehaviourCorrection::kNone;
  // Otherwise, with one optimizer step per batch, pi_old is the policy of the gradient pass
  // itself: its logprobs are that pass's, detached (bit for bit what a separate pass gives).
  const bool old_from_grad_pass = needs_old && !old_before_grad;
  at::Tensor old_logp = at::zeros_like(mask), old_values = at::zeros_like(mask), ref_logp;
  if (reference_ != nullptr && lc.kl_coef > 0) ref_logp = at::zeros_like(mask);
  if (old_before_grad || ref_logp.defined()) {
    at::NoGradGuard no_grad;
    for_micro_batches(B, mb_rows, [&](int64_t s, int64_t e) {
      PackedBatch mb = slice_rows(b, s, e);
      if (old_before_grad) {
        model::ForwardOutput out = run_forward(policy_, mb);
        old_logp.slice(0, s, e).copy_(token_logprobs(out.logits_BTV, mb.input_ids_BT));
        if (lc.uses_critic()) {
          old_values.slice(0, s, e).copy_(shifted_values(out.hidden_BTH, value_w_1H_, value_b_1));
        }
      }
      if (ref_logp.defined()) {
        model::ForwardOutput ref = run_forward(*reference_, mb);
        ref_logp.slice(0, s, e).copy_(token_logprobs(ref.logits_BTV, mb.input_ids_BT));
      }
    });
  }
  at::Tensor adv = advantages(b, old_values, ref_logp, old_before_grad ? old_logp : b.behav_logp_BT, group_size);
  rl::LossNorm norm = rl::LossNorm::from_mask(mask, cfg_.max_new_tokens);
  double total_tokens = std::max(1.0, b.attention_mask_BT.sum().item<double>());

  StepStats st;
  for (int64_t epoch = 0; epoch < cfg_.ppo_epochs; ++epoch) {
    opt_->zero_grad();
    st = StepStats{};
    for_micro_batches(B, mb_rows, [&](int64_t s, int64_t e) {
      PackedBatch mb = slice_rows(b, s, e);
      model::ForwardOutput out = run_forward(policy_, mb);
      rl::PolicyLossInputs in;
      in.logp_BL = token_logprobs(out.logits_BTV, mb.input_ids_BT);
      if (old_from_grad_pass) old_logp.slice(0, s, e).copy_(in.logp_BL.detach());
      if (needs_old) in.old_logp_BL = old_logp.slice(0, s, e);
      in.behav_logp_BL = mb.behav_logp_BT;
      if (!needs_old) in.behav_logp_BL = at::Tensor();  // fresh samples: behaviour = old
      if (ref_logp.defined()) in.ref_logp_BL = ref_logp.slice(0, s, e);
      in.advantages_BL = adv.slice(0, s, e);
      in.mask_BL = mb.response_mask_BT;
      if (lc.entropy_coef > 0) in.entropy_BL = rl::token_entropy(shifted_logits(out.logits_BTV));
      router_inputs(out, mb, in, policy_.config().num_experts);
      in.aux_scale = mb.attention_mask_BT.sum().item<double>() / total_tokens;
      in.norm = norm;
      rl::PolicyLoss pl = rl::compute_policy_loss(in, lc);
      at::Tensor loss = pl.loss;
      const auto& m = pl.metrics;
      if (lc.uses_critic()) {
        rl::ValueLossInputs vin{shifted_values(out.hidden_BTH, value_w_1H_, value_b_1),
                                old_values.slice(0, s, e), returns_BT_.slice(0, s, e),
                                mb.response_mask_BT, norm};
        rl::ValueLoss vl = rl::compute_value_loss(vin, lc);
        loss = loss + vl.loss;
        st.value_loss += vl.metrics.value_loss;
      }
      loss.backward();
      double w = m.num_tokens;
      st.loss += loss.item<double>();
      st.pg_loss += m.pg_loss;
      st.kl += m.kl_loss;
      st.aux_loss += m.lb_loss * in.aux_scale;
      st.entropy += m.entropy * w;
      st.clip_frac += m.clip_frac * w;
      st.approx_kl += m.approx_kl * w;
      st.behav_weight += m.behav_weight_mean * w;
      st.num_tokens += static_cast<int64_t>(w);
    });
    st.lr = cfg_.schedule.at(step_);
    st.grad_norm = clip_gradients();
    opt_->step(st.lr);
  }
  opt_->zero_grad();
  ++step_;
  double n = std::max<double>(1, static_cast<double>(st.num_tokens));
  st.entropy /= n;
  st.clip_frac /= n;
  st.approx_kl /= n;
  st.behav_weight /= n;
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
  for_micro_batches(B, std::max<int64_t>(1, cfg_.micro_batch_size), [&](int64_t s, int64_t e) {
    PackedBatch mb = slice_rows(b, s, e);
    model::ForwardOutput out = run_forward(policy_, mb);
    at::Tensor nll = -(token_logprobs(out.logits_BTV, mb.input_ids_BT) * mb.response_mask_BT).sum() / total;
    rl::PolicyLossInputs in;  // only the router terms, to keep experts balanced from the start
    router_inputs(out, mb, in, policy_.config().num_experts);
    double scale = mb.attention_mask_BT.sum().item<double>() / std::max(1.0, b.attention_mask_BT.sum().item<double>());
    at::Tensor aux = rl::load_balancing_loss(in.router_logits_TE, in.topk_idx_TK, in.num_experts,
                                             in.router_token_mask_T);
    at::Tensor loss = nll + cfg_.loss.aux_loss_coef * scale * aux;
    loss.backward();
    st.loss += nll.item<double>();
    st.aux_loss += aux.item<double>() * scale;
  });
  st.lr = lr;
  st.grad_norm = clip_gradients();
  opt_->step(lr);
  opt_->zero_grad();
  st.num_samples = B;
  st.num_tokens = static_cast<int64_t>(total);
  st.seconds = now_seconds() - t0;
  return st;
}

}  // namespace moerl::train
