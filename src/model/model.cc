// Model: parameter creation/loading/saving and the decoder forward shared by every
// architecture (pre-norm residual blocks: attention, then dense MLP or MoE).
#include "model/model.h"
#include "model/sharded_files.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "base/check.h"
#include "base/error.h"
#include "base/log.h"
#include "io/tensor_io.h"
#include "model/common/attention.h"
#include "model/common/expert_pack.h"
#include "model/common/layers.h"
#include "model/common/mla_attention.h"
#include "model/common/moe.h"
#include "model/checkpointed_layer.h"
#include "model/decoder_layer.h"

namespace moerl::model {

namespace {

std::string shape_str(at::IntArrayRef s) { return c10::str(s); }

}  // namespace

ExpertRange local_experts(const io::HfConfig& cfg, int rank, int world) {
  if (world <= 0 || cfg.num_experts % world != 0) {
    throw Error("ep world size " + std::to_string(world) + " must divide num_experts=" +
                    std::to_string(cfg.num_experts),
                "choose an expert-parallel size that divides the number of experts");
  }
  const int64_t n = cfg.num_experts / world;
  return {rank * n, n};
}

Model::Model(io::HfConfig cfg, Params params, ModelOptions options)
    : cfg_(std::move(cfg)), options_(std::move(options)) {
  cfg_.validate("model config");
  arch_ = &find_arch(cfg_.model_type);
  group_ = options_.ep_group ? options_.ep_group : ep::loopback_group(cfg_.num_experts);
  if (group_->num_experts() != cfg_.num_experts) {
    throw Error("ep group has num_experts=" + std::to_string(group_->num_experts()) + " but the model has " +
                    std::to_string(cfg_.num_experts),
                "create the ep::Group with the model's num_experts");
  }
  experts_ = local_experts(cfg_, group_->rank(), group_->world_size());
  for (const ParamSpec& spec : arch_->param_specs(cfg_, experts_)) {
    auto it = params.find(spec.name);
    if (it == params.end()) {
      throw Error("model parameters lack tensor " + spec.name + " (expected shape " + shape_str(spec.shape) + ")",
                  "the checkpoint does not match config.json (model_type " + cfg_.model_type + ")");
    }
    if (it->second.sizes() != at::IntArrayRef(spec.shape)) {
      throw Error("tensor " + spec.name + " has shape " + shape_str(it->second.sizes()) + ", expected " +
                      shape_str(spec.shape),
                  "the checkpoint does not match config.json (check hidden_size, head_dim, experts)");
    }
    if (spec.role == TensorRole::kBuffer) {
      const at::ScalarType bt = options_.dtype == at::kDouble ? at::kDouble : at::kFloat;
      buffers_[spec.name] = it->second.to(at::TensorOptions().dtype(bt).device(options_.device)).detach().contiguous();
      params.erase(it);
      continue;
    }
    // NOTE: no copy when dtype/device already match: the model takes over the tensors.
    at::Tensor t = it->second.to(at::TensorOptions().dtype(options_.dtype).device(options_.device)).detach();
    params_[spec.name] = t.contiguous().set_requires_grad(true);
    params.erase(it);
  }
  if (!params.empty()) {
    std::string extra;
    int n = 0;
    for (const auto& [name, _] : params) {
      if (n++ < 5) extra += (extra.empty() ? "" : ", ") + name;
    }
    MOERL_LOG(WARN) << "ignoring " << params.size() << " checkpoint tensor(s) the model does not use: " << extra;
  }
  pack_moe_experts();
  const Params all = state();
  for (int64_t i = 0; i < cfg_.num_hidden_layers; ++i) {
    layers_.push_back(arch_->bind_layer(cfg_, experts_, all, i));
  }
  rope_ = rope_table(cfg_, cfg_.head_dim, options_.dtype, options_.device);
  embed_ = arch_util::get(params_, "model.embed_tokens.weight");
  final_norm_ = arch_util::get(params_, "model.norm.weight");
  lm_head_ = cfg_.tie_word_embeddings ? embed_ : arch_util::get(params_, "lm_head.weight");
}

void Model::pack_moe_experts() {
  std::map<const c10::TensorImpl*, std::string> name_of;
  for (const auto& [name, t] : params_) name_of[t.unsafeGetTensorImpl()] = name;
  Params all = state();  // kept in step with params_, so no old expert outlives its layer's swap
  for (int64_t i = 0; i < cfg_.num_hidden_layers; ++i) {
    std::vector<ExpertWeights> experts;
    {
      LayerWeights w = arch_->bind_layer(cfg_, experts_, all, i);
      if (!w.is_moe || packed_view(w.moe.experts).w13_E2IH.defined()) continue;  // packed already: shared
      experts = std::move(w.moe.experts);
    }
    std::vector<ExpertWeights> views = pack_experts(experts);
    for (size_t e = 0; e < views.size(); ++e) {
      const std::pair<const at::Tensor*, const at::Tensor*> swaps[] = {{&experts[e].gate_IH, &views[e].gate_IH},
                                                                      {&experts[e].up_IH, &views[e].up_IH},
                                                                      {&experts[e].down_HI, &views[e].down_HI}};
      for (const auto& [old_t, view] : swaps) {
        auto it = name_of.find(old_t->unsafeGetTensorImpl());
        MOERL_CHECK(it != name_of.end()) << "layer " << i << " expert " << e << " is not a model parameter";
        params_[it->second] = all[it->second] = view->detach().set_requires_grad(true);
      }
    }
    // `experts` (the old tensors) is released here: one layer's experts are held twice at most.
  }
}

Params Model::state() const {
  Params all = params_;
  all.insert(buffers_.begin(), buffers_.end());
  return all;
}

std::vector<at::Tensor> Model::parameters() const {
  std::vector<at::Tensor> out;
  out.reserve(params_.size());
  for (const auto& [_, t] : params_) out.push_back(t);
  return out;
}

int64_t Model::num_parameters() const {
  int64_t n = 0;
  for (const auto& [_, t] : params_) n += t.numel();
  return n;
}

int64_t Model::num_moe_layers() const {
  int64_t n = 0;
  for (const LayerWeights& w : layers_) n += w.is_moe ? 1 : 0;
  return n;
}

at::Tensor Model::checked_replay(const at::Tensor& replay, int64_t B, int64_t T) const {
  if (!replay.defined()) return replay;
  const int64_t L = num_moe_layers(), K = arch_->router_config(cfg_).top_k;
  if (replay.dim() != 4 || replay.size(0) != B || replay.size(1) != T || replay.size(2) != L || replay.size(3) != K) {
    throw Error("routing_replay " + shape_str(replay.sizes()) + " must be [B, T, MoE layers, top-k] = [" +
                    std::to_string(B) + ", " + std::to_string(T) + ", " + std::to_string(L) + ", " + std::to_string(K) +
                    "]",
                "record routing with the same model architecture (GenerateConfig::record_routing)");
  }
  return replay.to(options_.device).to(at::kLong);
}

std::vector<at::Tensor> Model::layer_params(int64_t layer) const {
  // NOTE: "model.layers.1." does not prefix "model.layers.10.": the trailing dot ends the index.
  const std::string prefix = arch_util::layer_prefix(layer);
  std::vector<at::Tensor> out;
  for (auto it = params_.lower_bound(prefix); it != params_.end() && it->first.rfind(prefix, 0) == 0; ++it) {
    out.push_back(it->second);
  }
  return out;
}

KvCache Model::make_cache(int64_t batch, int64_t capacity) const {
  return KvCache(cfg_.num_hidden_layers, batch, capacity, arch_->kv_cache_shape(cfg_),
                 at::TensorOptions().dtype(options_.dtype).device(options_.device));
}

ForwardOutput Model::forward(const ForwardInput& in) {
  const at::Tensor& ids = in.input_ids;
  if (!ids.defined() || ids.dim() != 2 || ids.scalar_type() != at::kLong) {
    throw Error("input_ids must be an int64 tensor [B,T]; got " +
                    (ids.defined() ? std::string(c10::toString(ids.scalar_type())) + " " + shape_str(ids.sizes())
                                   : std::string("nothing")),
                "pass token ids as int64 with shape [batch, tokens]");
  }
  const int64_t B = ids.size(0), T = ids.size(1);
  if (B == 0 || T == 0) throw Error("input_ids " + shape_str(ids.sizes()) + " is empty", "pass at least one token");
  const int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
  if (lo < 0 || hi >= cfg_.vocab_size) {
    throw Error("input_ids hold ids in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                    "], outside the vocabulary [0, " + std::to_string(cfg_.vocab_size) + ")",
                "tokenize with this model's tokenizer");
  }
  const auto dev = options_.device;
  at::Tensor x_ids = ids.to(dev);
  at::Tensor mask = in.attention_mask.defined() ? in.attention_mask.to(dev).to(at::kLong)
                                                : at::ones({B, T}, at::TensorOptions().dtype(at::kLong).device(dev));
  if (mask.sizes() != ids.sizes()) {
    throw Error("attention_mask " + shape_str(mask.sizes()) + " must match input_ids " + shape_str(ids.sizes()),
                "give one 0/1 entry per token");
  }
  KvCache* cache = in.cache;
  const bool row_cursors = cache != nullptr && !cache->row_fill.empty();
  if (row_cursors && T != 1) {
    throw Error("a KV cache with per-row cursors takes one token per row, not input_ids " + shape_str(ids.sizes()),
                "prefill into a fresh cache and move it in with KvCache::put_rows");
  }
  int64_t start = 0;
  at::Tensor pos = (mask.cumsum(1) - 1).clamp_min(0);
  if (cache != nullptr) {
    start = cache->length;  // with per-row cursors: the furthest one
    if (cache->batch() != B || start + T > cache->capacity()) {
      throw Error("KV cache [batch " + std::to_string(cache->batch()) + ", capacity " +
                      std::to_string(cache->capacity()) + ", used " + std::to_string(start) + "] cannot take " +
                      shape_str(ids.sizes()),
                  "make the cache with make_cache(batch, prompt_len + max_new_tokens)");
    }
    pos = pos + cache->next_pos.unsqueeze(1);
  }
  if (in.position_ids.defined()) pos = in.position_ids.to(dev).to(at::kLong);

  AttentionContext ctx;
  ctx.cache_start = start;
  std::tie(ctx.cos_BTD, ctx.sin_BTD) = rope_cos_sin(pos, rope_, options_.dtype);
  const int64_t S = start + T;
  // causal_TS[t, s]: key slot s is not after query t (query t sits in slot start + t).
  at::Tensor q_slot = at::arange(start, S, at::TensorOptions().dtype(at::kLong).device(dev)).unsqueeze(1);
  at::Tensor k_slot = at::arange(0, S, at::TensorOptions().dtype(at::kLong).device(dev)).unsqueeze(0);
  at::Tensor causal_TS = k_slot.le(q_slot);
  at::Tensor key_valid_BS;
  if (row_cursors) {
    // Row b's token sits at its own cursor; nothing after it is valid, so validity is causal.
    ctx.row_slot_B = at::tensor(cache->row_fill, at::kLong).to(dev);
    ctx.key_slots = S;
    KvCache::write_slots(cache->valid, 1, ctx.row_slot_B, mask.ne(0));
    ctx.allowed_B1TS = cache->valid.narrow(1, 0, S).view({B, 1, 1, S});
  } else {
    if (cache != nullptr) {
      cache->valid.narrow(1, start, T).copy_(mask.ne(0));
      key_valid_BS = cache->valid.narrow(1, 0, S);
    } else {
      key_valid_BS = mask.ne(0);
    }
    ctx.allowed_B1TS = (causal_TS.unsqueeze(0) & key_valid_BS.unsqueeze(1)).unsqueeze(1);
  }

  DecoderEnv env{.shape = {cfg_.num_attention_heads, cfg_.num_key_value_heads, cfg_.head_dim, cfg_.rms_norm_eps},
                 .mla = cfg_.is_mla() ? mla_shape(cfg_) : MlaShape{},
                 .router = arch_->router_config(cfg_),
                 .rms_norm_eps = cfg_.rms_norm_eps,
                 .ctx = std::move(ctx),
                 .cache = cache,
                 .group = group_.get()};
  const bool checkpoint =
      in.checkpointing == LayerCheckpointing::kPerLayer && at::GradMode::is_enabled() && cache == nullptr;
  ForwardOutput out;
  const at::Tensor replay = checked_replay(in.routing_replay, B, T);
  at::Tensor h = at::embedding(embed_, x_ids);
  for (int64_t i = 0; i < cfg_.num_hidden_layers; ++i) {
    const LayerWeights& w = layers_[i];
    at::Tensor forced;
    if (w.is_moe && replay.defined()) {
      forced = replay.select(2, static_cast<int64_t>(out.routing.size())).reshape({B * T, -1});
    }
    LayerOutput o;
    if (checkpoint) {
      // NOTE: the closure copies the weights' handles and env (tensors by reference count):
      // the backward calls it after this forward returned.
      LayerFn fn = [w, i, env](const at::Tensor& x, const at::Tensor& f) { return decoder_layer(w, i, x, f, env); };
      o = checkpointed_layer(std::move(fn), h, forced, layer_params(i));
    } else {
      o = decoder_layer(w, i, h, forced, env);
    }
    h = o.h_BTH;
    if (w.is_moe) out.routing.push_back({i, o.router_logits_TE, o.topk_idx_TK, o.topk_weight_TK, o.expert_load_E});
  }
  out.hidden_BTH = rms_norm(h, final_norm_, cfg_.rms_norm_eps);
  if (!in.skip_logits) {
    out.logits_BTV = at::linear(in.last_logits_only ? out.hidden_BTH.narrow(1, T - 1, 1) : out.hidden_BTH, lm_head_);
    if (out.logits_BTV.scalar_type() != at::kDouble) out.logits_BTV = out.logits_BTV.to(at::kFloat);
  }
  if (row_cursors) {
    // The caller's mask as given (generate() keeps it on the host): no device sync per step.
    const at::Tensor fed =
        (in.attention_mask.defined() ? in.attention_mask : mask).select(1, 0).to(at::kCPU, at::kLong).contiguous();
    const int64_t* f = fed.data_ptr<int64_t>();
    for (int64_t b = 0; b < B; ++b) cache->row_fill[b] += f[b] != 0 ? 1 : 0;
    cache->length = *std::max_element(cache->row_fill.begin(), cache->row_fill.end());
    cache->next_pos.add_(mask.sum(1));
  } else if (cache != nullptr) {
    cache->length = S;
    cache->next_pos.add_(mask.sum(1));
  }
  return out;
}

void Model::save(const std::string& dir, int64_t max_shard_bytes) const {
  std::filesystem::create_directories(dir);
  io::save_tensors(dir, shard_tensors(*this, /*rank=*/0), max_shard_bytes);  // rank 0: everything held
  write_model_config(*this, dir);
}

void Model::load_weights(const Params& weights) {
  at::NoGradGuard no_grad;
  for (auto& [name, p] : params_) {
    auto it = weights.find(name);
    if (it == weights.end()) {
      throw Error("new weights lack tensor " + name, "publish every parameter of the model");
    }
    if (it->second.sizes() != p.sizes()) {
      throw Error("new weights: tensor " + name + " has shape " + shape_str(it->second.sizes()) + ", expected " +
                      shape_str(p.sizes()),
                  "the weights come from a different model config");
    }
    p.copy_(it->second);
  }
  for (auto& [name, b] : buffers_) {
    auto it = weights.find(name);
    if (it == weights.end()) continue;  // not trained: publications may leave buffers out
    if (it->second.sizes() != b.sizes()) {
      throw Error("new weights: buffer " + name + " has shape " + shape_str(it->second.sizes()) + ", expected " +
                      shape_str(b.sizes()),
                  "the weights come from a different model config");
    }
    b.copy_(it->second);
  }
}

Model load_model(const std::string& dir, ModelOptions options) {
  namespace fs = std::filesystem;
  const fs::path cfg_path = fs::path(dir) / "config.json";
  if (!fs::exists(cfg_path)) {
    throw Error("model directory " + dir + " has no config.json",
                "point --model at a Hugging Face checkpoint folder (config.json + *.safetensors)",
                ErrorCode::kNotFound);
  }
  io::HfConfig cfg = io::HfConfig::load(cfg_path.string());
  const Arch& arch = find_arch(cfg.model_type);
  Params tensors = io::load_tensors(dir);
  ExpertRange experts{0, cfg.num_experts};
  if (options.ep_group) experts = local_experts(cfg, options.ep_group->rank(), options.ep_group->world_size());
  arch.canonicalize(cfg, experts, tensors);
  // Tied checkpoints sometimes carry lm_head.weight too; it equals the embedding.
  if (cfg.tie_word_embeddings) tensors.erase("lm_head.weight");
  for (const ParamSpec& spec : arch.param_specs(cfg, experts)) {
    io::require_tensor(tensors, spec.name, spec.shape);  // names the file-level problem
  }
  return Model(std::move(cfg), std::move(tensors), std::move(options));
}

Model init_random(const io::HfConfig& cfg, uint64_t seed, ModelOptions options) {
  cfg.validate("init_random config");
  const Arch& arch = find_arch(cfg.model_type);
  ExpertRange experts{0, cfg.num_experts};
  if (options.ep_group) experts = local_experts(cfg, options.ep_group->rank(), options.ep_group->world_size());
  at::Generator gen = at::detail::createCPUGenerator(seed);
  Params params;
  // NOTE: every rank draws the full parameter list in the same order, so an expert's values
  // do not depend on the ep size.
  for (const ParamSpec& spec : arch.param_specs(cfg, ExpertRange{0, cfg.num_experts})) {
    at::Tensor t;
    switch (spec.init) {
      case Init::kNormal: t = at::empty(spec.shape, at::kFloat).normal_(0.0, 0.02, gen); break;
      case Init::kOnes: t = at::ones(spec.shape, at::kFloat); break;
      case Init::kZeros: t = at::zeros(spec.shape, at::kFloat); break;
    }
    params[spec.name] = t;
  }
  arch.canonicalize(cfg, experts, params);  // drops experts other ranks hold
  return Model(cfg, std::move(params), std::move(options));
}

}  // namespace moerl::model
