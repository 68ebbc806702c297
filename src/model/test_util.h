// Helpers for the model tests: fixture paths, tiny configs, tensor comparisons.
#pragma once

#include <ATen/CPUGeneratorImpl.h>

#include <ATen/ATen.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "io/hf_config.h"
#include "model/generate.h"
#include "model/model.h"

namespace moerl::model::testing {

inline std::string source_dir() {
  const char* s = std::getenv("MOERL_SOURCE_DIR");
  return s ? s : ".";
}

inline std::string fixture_dir(const std::string& name) { return source_dir() + "/tests/fixtures/" + name; }

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Logits of our model and of transformers agree to 1e-4 on the fixtures (Parity tests).
inline constexpr double kLogitTol = 1e-4;

// Greedy ids (prompt + continuation, [B, T+N]) against a reference committed from another
// library on another machine. Exact, except where the reference's choice is a near-tie: at
// the first position a row differs, the reference token's logit must be within rounding
// (2 x kLogitTol) of our top logit there, given the same prefix; that row's continuations
// then diverge and are not compared. Any other difference fails.
inline void expect_greedy_matches(Model& m, const at::Tensor& got, const at::Tensor& want, int64_t prompt_len,
                                  const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  for (int64_t b = 0; b < want.size(0); ++b) {
    for (int64_t t = prompt_len; t < want.size(1); ++t) {
      const int64_t ours = got[b][t].item<int64_t>(), theirs = want[b][t].item<int64_t>();
      if (ours == theirs) continue;
      at::Tensor logits = m.forward({.input_ids = want.slice(0, b, b + 1).slice(1, 0, t)}).logits_BTV[0][t - 1];
      const double gap = logits[ours].item<double>() - logits[theirs].item<double>();
      EXPECT_LE(gap, 2 * kLogitTol) << what << " row " << b << " step " << t - prompt_len << ": token " << ours
                                    << " vs reference " << theirs << " is no near-tie (logit gap " << gap << ")";
      break;
    }
  }
}

// A tiny qwen3_moe config: 2 layers (layer 1 dense unless `all_moe`), 8 experts top-2.
inline io::HfConfig tiny_qwen3(bool all_moe = false) {
  io::HfConfig c;
  c.model_type = "qwen3_moe";
  c.vocab_size = 50;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.moe_intermediate_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.num_experts = 8;
  c.num_experts_per_tok = 2;
  c.norm_topk_prob = true;
  if (!all_moe) c.mlp_only_layers = {1};
  c.rope_theta = 10000.0;
  c.max_position_embeddings = 128;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  c.pad_token_id = 0;
  return c;
}

inline io::HfConfig tiny_mixtral() {
  io::HfConfig c = tiny_qwen3(true);
  c.model_type = "mixtral";
  c.intermediate_size = 24;
  c.moe_intermediate_size = 24;
  c.num_experts = 4;
  c.mlp_only_layers.clear();
  return c;
}

// Routing-replay fixtures: top-1 routing over 4 experts; make_router_ties sets router rows 0
// and 1 of every MoE layer to one large vector plus/minus delta * v (the sign of delta picks
// which wins a token that prefers them) and scales the experts up so the choice shows in
// the logits. Two models from one seed and opposite deltas route those tokens differently.
inline io::HfConfig tie_config() {
  io::HfConfig c = tiny_qwen3(/*all_moe=*/true);
  c.num_experts = 4;
  c.num_experts_per_tok = 1;
  return c;
}

inline void make_router_ties(Model& m, double delta, uint64_t seed) {
  at::NoGradGuard no_grad;
  at::Generator g = at::detail::createCPUGenerator(seed);
  for (const auto& [name, p] : m.params()) {
    if (name.find("experts.") != std::string::npos) p.mul_(20.0);  // experts that matter to the logits
    if (name.find("mlp.gate.weight") == std::string::npos) continue;
    at::Tensor u = at::randn({p.size(1)}, g, p.options()) * 3.0;
    at::Tensor v = at::randn({p.size(1)}, g, p.options());
    p[0].copy_(u + delta * v);
    p[1].copy_(u - delta * v);
  }
}

// A tiny qwen2_moe config: q/k/v biases, a shared expert, layer 1 dense.
inline io::HfConfig tiny_qwen2() {
  io::HfConfig c = tiny_qwen3();
  c.model_type = "qwen2_moe";
  c.attention_bias = true;
  c.shared_expert_intermediate_size = 24;
  return c;
}

// A tiny deepseek_v3 config: MLA (q_lora_rank 16, or null when `q_lora` is false), YaRN,
// 8 experts in 4 groups (top-2 of the best 2 groups), one shared expert, layer 0 dense.
inline io::HfConfig tiny_deepseek(bool q_lora = true) {
  io::HfConfig c = tiny_qwen3(true);
  c.model_type = "deepseek_v3";
  c.num_key_value_heads = c.num_attention_heads;
  c.q_lora_rank = q_lora ? 16 : 0;
  c.kv_lora_rank = 12;
  c.qk_nope_head_dim = 8;
  c.qk_rope_head_dim = 4;
  c.v_head_dim = 8;
  c.head_dim = 4;
  c.n_shared_experts = 1;
  c.n_group = 4;
  c.topk_group = 2;
  c.routed_scaling_factor = 2.5;
  c.first_k_dense_replace = 1;
  c.rope_scaling.type = io::RopeType::kYarn;
  c.rope_scaling.factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = 32;
  c.rope_scaling.mscale = 1.0;
  c.rope_scaling.mscale_all_dim = 1.0;
  return c;
}

// The tiny config of a model_type (qwen3_moe, mixtral, qwen2_moe, deepseek_v3, and
// deepseek_v3_noqlora for q_lora_rank null).
inline io::HfConfig tiny_config(const std::string& name) {
  if (name == "mixtral") return tiny_mixtral();
  if (name == "qwen2_moe") return tiny_qwen2();
  if (name == "deepseek_v3") return tiny_deepseek(true);
  if (name == "deepseek_v3_noqlora") return tiny_deepseek(false);
  return tiny_qwen3();
}

// An EP group that only reports its shape (rank, world, experts): for tests that create,
// shard and load models but never forward.
class ShapeOnlyGroup final : public ep::Group {
 public:
  ShapeOnlyGroup(int rank, int world, int64_t e) : rank_(rank), world_(world), e_(e) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  int64_t num_experts() const override { return e_; }
  ep::Layout get_dispatch_layout(const at::Tensor&, int64_t) override { throw Error("no forward here"); }
  ep::Dispatched dispatch(const at::Tensor&, const at::Tensor&, const at::Tensor&, const ep::Layout&,
                          const ep::Handle*) override {
    throw Error("no forward here");
  }
  at::Tensor combine(const at::Tensor&, const ep::Handle&) override { throw Error("no forward here"); }

 private:
  int rank_, world_;
  int64_t e_;
};

// Ragged prompts with repeats (refills share a prefill) for the continuous-batching tests.
inline std::vector<std::vector<int64_t>> ragged_prompts() {
  return {{1, 7, 9, 3, 12}, {1, 4}, {1, 30, 2, 8}, {1, 4}, {1, 5, 6, 7, 8, 9, 10, 11}, {1, 30, 2, 8},
          {1, 2},           {1, 4}, {1, 17, 3}};
}

// Two generate() results agree prompt by prompt: tokens, finish reasons and routing records
// exactly, logprobs within `tol`.
inline void expect_same_generations(const std::vector<Generation>& x, const std::vector<Generation>& y, double tol,
                                    const std::string& what) {
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t s = 0; s < x.size(); ++s) {
    EXPECT_EQ(x[s].tokens, y[s].tokens) << what << ": prompt " << s;
    EXPECT_EQ(x[s].finish, y[s].finish) << what << ": prompt " << s;
    EXPECT_EQ(x[s].routed_experts, y[s].routed_experts) << what << ": prompt " << s;
    ASSERT_EQ(x[s].logprobs.size(), y[s].logprobs.size()) << what << ": prompt " << s;
    for (size_t t = 0; t < x[s].logprobs.size(); ++t) EXPECT_NEAR(x[s].logprobs[t], y[s].logprobs[t], tol) << what;
  }
}

}  // namespace moerl::model::testing
