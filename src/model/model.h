// The MoE transformer: parameters (autograd leaves under their Hugging Face names), the
// training/inference forward, KV caches, and checkpoint load/save in the HF layout.
//
//   model::Model m = model::load_model("ckpt/");                // config.json + safetensors
//   model::Model r = model::init_random(cfg, /*seed=*/7);        // N(0, 0.02), norms 1
//   model::ForwardOutput o = m.forward({ids_BT, mask_BT});       // logits [B,T,V] float32
//   o.logits_BTV.log_softmax(-1) ...; loss.backward();           // grads on m.params()
//   m.save("out/");                                              // loads back in transformers
//
// Legend: B batch, T tokens, V vocab, H hidden, E experts, K top-k.
// Thread-safety: one forward at a time per Model (the ep::Group is single-threaded).
// Failure: bad checkpoints and bad inputs (ids out of range, shape mismatches) are
// moerl::Error naming the input and a HINT; broken invariants are kInternal errors.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ep/ep.h"
#include "io/hf_config.h"
#include "model/archs/arch.h"
#include "model/common/kv_cache.h"
#include "model/common/rope.h"

namespace moerl::model {

struct ModelOptions {
  at::ScalarType dtype = at::kFloat;  // parameter/activation dtype (kFloat, kBFloat16, kDouble)
  at::Device device = at::kCPU;
  // Expert-parallel group; null = loopback over all cfg.num_experts (one rank). With R
  // ranks the model holds (and loads) only experts [rank*E/R, (rank+1)*E/R).
  std::shared_ptr<ep::Group> ep_group;
};

// Activation checkpointing of the training forward (checkpointed_layer.h).
enum class LayerCheckpointing {
  kNone,      // every layer's activations are kept for the backward
  kPerLayer,  // each decoder layer keeps only its input; the backward recomputes the layer
};

struct ForwardInput {
  at::Tensor input_ids;       // [B,T] int64 (required)
  at::Tensor attention_mask;  // [B,T] 1 = token, 0 = pad (left or right); default all 1
  at::Tensor position_ids;    // [B,T] int64; default cumsum(mask)-1 (+ cache positions)
  KvCache* cache = nullptr;   // inference: append these tokens to the cache and attend to it
  // Routing replay (R3): [B,T,L,K] int64 expert ids to force, L = the MoE layers in order; a
  // token whose ids hold a -1 routes live. Undefined: every token routes live.
  at::Tensor routing_replay;
  // Logits for each row's last position only (logits_BTV is [B,1,V]): generation's prefill,
  // which samples from the last prompt token, never holds [B,T,V] float32 logits (at vocab
  // 151936, 512 prompt tokens and batch 256 that is 80 GB).
  bool last_logits_only = false;
  // No logits at all (logits_BTV undefined): the trainer scores tokens from hidden_BTH and
  // lm_head() itself, a chunk of positions at a time (train/chunked_logprobs.h).
  bool skip_logits = false;
  // Applies only while grad mode is on and without a cache (a training forward); values and
  // gradients equal kNone's, the backward costs one more forward of each layer.
  LayerCheckpointing checkpointing = LayerCheckpointing::kNone;
};

// Router statistics of one MoE layer (for load-balancing / z losses and monitoring).
struct LayerRouting {
  int64_t layer = 0;
  at::Tensor router_logits_TE;  // [B*T,E] pre-softmax, differentiable
  at::Tensor topk_idx_TK;       // [B*T,K] int64
  at::Tensor topk_weight_TK;    // [B*T,K] combine weights
  at::Tensor expert_load_E;     // [E] int64 tokens per expert (pad tokens included)
};

struct ForwardOutput {
  at::Tensor logits_BTV;  // float32 (float64 for a double model); [B,1,V] for last_logits_only
  at::Tensor hidden_BTH;  // final normed hidden state (value heads)
  std::vector<LayerRouting> routing;  // one per MoE layer, in layer order
};

class Model {
 public:
  // `params` must hold exactly arch.param_specs(cfg, local experts) with those shapes (the
  // buffers too, e.g. state() of another model); parameters are converted to
  // options.dtype/device (shared, not copied, when they already match) and made leaves with
  // requires_grad; buffers go to float32 (float64 for double models), without grad. Each MoE
  // layer's experts are then held packed (expert_pack.h): copied once into one storage whose
  // views are the per-expert leaves, or shared when they are another model's packed views.
  Model(io::HfConfig cfg, Params params, ModelOptions options = {});
  Model(Model&&) = default;
  Model& operator=(Model&&) = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  ForwardOutput forward(const ForwardInput& in);

  // A cache for `batch` rows and `capacity` slots (prompt + new tokens).
  KvCache make_cache(int64_t batch, int64_t capacity) const;

  // config.json + model.safetensors (or shards when max_shard_bytes > 0), HF names, the
  // per-expert hub layout, this model's dtype (buffers in float32). Saves this rank's
  // experts only.
  void save(const std::string& dir, int64_t max_shard_bytes = 0) const;
  // Copies `weights` (same names/shapes, any dtype) into the parameters in place, so bound
  // views stay valid: how rollout workers swap in a new policy version. Every parameter is
  // required; buffers are copied when `weights` holds them (they are not trained).
  void load_weights(const Params& weights);

  const io::HfConfig& config() const { return cfg_; }
  const Arch& arch() const { return *arch_; }
  // Trained leaves (HF names): what the optimizer, gradient all-reduce and clipping see.
  // Update values in place (copy_), never replace entries.
  const Params& params() const { return params_; }
  // Tensors that are loaded and saved but not trained (deepseek_v3's
  // mlp.gate.e_score_correction_bias); empty for the other architectures.
  const Params& buffers() const { return buffers_; }
  // params() and buffers() together (the same tensors): what a checkpoint holds, what a copy
  // of this model is built from.
  Params state() const;
  std::vector<at::Tensor> parameters() const;
  int64_t num_parameters() const;
  ExpertRange experts() const { return experts_; }
  int64_t num_moe_layers() const;  // layers with a router (the L of routing_replay)
  ep::Group& ep_group() { return *group_; }
  const ep::Group& ep_group() const { return *group_; }
  at::ScalarType dtype() const { return options_.dtype; }
  at::Device device() const { return options_.device; }
  const RopeTable& rope() const { return rope_; }
  // The output projection [V,H] (the embedding when tie_word_embeddings): logits = hidden · lm_headᵀ.
  const at::Tensor& lm_head() const { return lm_head_; }

 private:
  // Moves each MoE layer's local experts into packed storage (expert_pack.h) and makes the
  // per-expert parameters views of it, unless they are views of a packed layout already
  // (another model's tensors, shared).
  void pack_moe_experts();
  // in.routing_replay checked against [B,T,L,K] and moved to the device (undefined stays so).
  at::Tensor checked_replay(const at::Tensor& replay, int64_t B, int64_t T) const;
  // The trained tensors of decoder layer `layer` (names under "model.layers.{layer}."): the
  // autograd inputs of its activation checkpoint.
  std::vector<at::Tensor> layer_params(int64_t layer) const;

  io::HfConfig cfg_;
  const Arch* arch_ = nullptr;
  ModelOptions options_;
  std::shared_ptr<ep::Group> group_;
  ExpertRange experts_;
  Params params_;
  Params buffers_;
  std::vector<LayerWeights> layers_;
  RopeTable rope_;
  at::Tensor embed_, final_norm_, lm_head_;
};

// Loads `dir` (config.json + model.safetensors, or a sharded index). Accepts the per-expert
// hub layout and transformers 5's fused expert tensors; loads only this rank's experts.
Model load_model(const std::string& dir, ModelOptions options = {});
// Fresh parameters: N(0, 0.02^2) matrices, ones for norms, zeros for biases; reproducible
// from `seed` whatever the device.
Model init_random(const io::HfConfig& cfg, uint64_t seed, ModelOptions options = {});

// The experts rank `rank` of `world` holds (Error if world does not divide num_experts).
ExpertRange local_experts(const io::HfConfig& cfg, int rank, int world);

}  // namespace moerl::model
