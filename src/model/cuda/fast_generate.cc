// fast_generate: GPU decode loop with a CUDA-graph decode step (see fast_generate.h).
#include "model/cuda/fast_generate.h"

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/InferenceMode.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <memory>

#include "base/error.h"
#include "base/log.h"
#include "model/cuda/decode_kernels.h"
#include "model/cuda/decode_step.h"
#include "model/cuda/sample_rows.h"
#include "model/decode_meter.h"
#include "model/prefill.h"
#include "model/routing_record.h"
#include "model/slot_table.h"

namespace moerl::model::cuda {
namespace {

struct Sampled {
  at::Tensor tok, lp, slp;
};

// One token per row: sample_rows (one pass per row) when the decode kernels' sampling is on,
// else at:: ops with the Gumbel noise from `gen`. `draw` counts the calls (sample_rows' noise).
Sampled sample(const at::Tensor& logits_BV, const SamplingConfig& s, at::Generator& gen, uint64_t seed,
               uint64_t& draw) {
  Sampled r;
  if (decode_kernels().sampling && logits_BV.scalar_type() == at::kFloat) {
    const at::Tensor x = logits_BV.contiguous();
    const int64_t R = x.size(0);
    r.tok = at::empty({R}, x.options().dtype(at::kLong));
    r.lp = at::empty({R}, x.options());
    r.slp = at::empty({R}, x.options());
    const cudaError_t err =
        sample_rows(x.data_ptr<float>(), R, x.size(1), s.greedy, static_cast<float>(s.temperature), seed, draw++,
                    r.tok.data_ptr<int64_t>(), r.lp.data_ptr<float>(), r.slp.data_ptr<float>(),
                    c10::cuda::getCurrentCUDAStream().stream());
    if (err != cudaSuccess) {
      throw Error(std::string("fast_generate: sample_rows failed: ") + cudaGetErrorString(err),
                  "turn the decode kernels' sampling off (model/cuda/decode_kernels.h) and report it");
    }
    return r;
  }
  at::Tensor logp = at::log_softmax(logits_BV, -1);
  if (s.greedy) {
    r.tok = logp.argmax(-1);
    r.slp = at::zeros({logits_BV.size(0)}, logp.options());
  } else {
    at::Tensor slogp = s.temperature == 1.0 ? logp : at::log_softmax(logits_BV / s.temperature, -1);
    at::Tensor u = at::rand(slogp.sizes(), gen, slogp.options()).clamp_(1e-20, 1.0 - 1e-7);
    r.tok = (slogp - at::log(-at::log(u))).argmax(-1);  // Gumbel-max: a draw from softmax(slogp)
    r.slp = slogp.gather(1, r.tok.unsqueeze(1)).squeeze(1);
  }
  r.lp = logp.gather(1, r.tok.unsqueeze(1)).squeeze(1);
  return r;
}

}  // namespace

bool fast_generate_accepts(const Model& m, const GenerateConfig& config) {
  const SamplingConfig& s = config.sampling;
  return m.device().is_cuda() && m.dtype() == at::kBFloat16 && m.config().sliding_window == 0 &&
         (s.greedy || (s.top_k == 0 && s.top_p >= 1.0)) && m.ep_group().world_size() == 1 &&
         !config.all_done && config.max_new_tokens > 0;
}

void install_fast_generate() {
  set_generate_fast_path({&fast_generate_accepts, [](Model& m, const std::vector<std::vector<int64_t>>& prompts,
                                                     const GenerateConfig& config) {
                            return fast_generate(m, prompts, config);
                          }});
}

// Captures one decode step into a CUDA graph on a side stream after one eager warm-up there
// (idempotent: same inputs); the graph's output logits land in `logits`. Null when capture
// fails (e.g. out of memory at real sizes): the capture is ended and the error cleared so
// the caller can decode eagerly on its own stream.
std::atomic<int64_t> capture_failures{0};

std::unique_ptr<at::cuda::CUDAGraph> capture_decode(DecodeStep& step, at::Tensor& logits) {
  c10::cuda::device_synchronize();
  // The graph allocates from a private pool, which cannot take the blocks the default pool
  // holds cached but free, and the allocator does not release cached blocks mid-capture. At
  // real size the prefill's freed activations are GBs of them: give them back to the driver
  // first (at 48 layers on an H100, 11.4 GiB stayed reserved and the capture ran out of memory).
  c10::cuda::CUDACachingAllocator::emptyCache();
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard sg(side);
  auto g = std::make_unique<at::cuda::CUDAGraph>();
  bool capturing = false;
  try {
    step.run();
    side.synchronize();
    // Thread-local capture: other threads of this process (the trainer, other in-process
    // workers) keep making synchronous CUDA calls while this one captures; the default global
    // mode makes those calls fail and invalidates the capture.
    g->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    capturing = true;
    logits = step.run();
    capturing = false;
    g->capture_end();
    side.synchronize();
    c10::cuda::device_synchronize();
    return g;
  } catch (const std::exception& e) {
    capture_failures.fetch_add(1);
    MOERL_LOG(WARN) << "fast_generate: CUDA graph capture failed, decoding eagerly: " << e.what();
  }
  if (capturing) {  // a step threw mid-capture: end it, or every later call on this thread fails
    try {
      g->capture_end();
    } catch (const std::exception&) {
    }
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(side.stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(side.stream(), &partial) == cudaSuccess && partial != nullptr) cudaGraphDestroy(partial);
    }
  }
  (void)cudaGetLastError();  // the capture's sticky error, not a device fault
  logits = at::Tensor();
  g.reset();
  c10::cuda::device_synchronize();
  return nullptr;
}

namespace {

// Steps decoded between two looks from the host (one device->host copy of the window's
// tokens): a row that ends idles at most this many steps before it is refilled.
constexpr int64_t kWindow = 8;

// The decode loop's device state and its window on the host. Per row: live_B (holds a running
// sequence), count_B and cap_B (its tokens so far, its cap); the step's tok_B/slot_B/active_B.
class GraphDecoder {
 public:
  GraphDecoder(Model& m, KvCache& cache, const GenerateConfig& config, SlotTable& table, RoutingRecorder* rec)
      : m_(m), cache_(cache), config_(config), table_(table), rec_(rec), step_(m, cache) {
    const int64_t R = cache.batch();
    const auto dev = m.device();
    auto lopt = at::TensorOptions().dtype(at::kLong).device(dev);
    gen_ = at::cuda::detail::createCUDAGenerator(dev.index() < 0 ? 0 : dev.index());
    gen_.set_current_seed(config.seed);
    eos_ = at::tensor(config.eos_ids.empty() ? std::vector<int64_t>{-1} : config.eos_ids, at::kLong).to(dev);
    toks_ = at::empty({R, kWindow}, lopt);
    lps_ = at::empty({R, kWindow}, lopt.dtype(at::kFloat));
    slps_ = at::empty({R, kWindow}, lopt.dtype(at::kFloat));
    live_B_ = at::zeros({R}, lopt.dtype(at::kBool));
    count_B_ = at::zeros({R}, lopt);
    cap_B_ = at::zeros({R}, lopt);
    step_.active_B.fill_(false);
    if (rec_ != nullptr) {
      L_ = m.num_moe_layers();
      K_ = m.arch().router_config(m.config()).top_k;
      step_.routing_LBK = at::zeros({L_, R, K_}, lopt);
      routes_ = at::full({kWindow, L_, R, K_}, -1, lopt);
    }
  }

  // Rows just given sequences (admit_waiting) start at their prompt slots, first sampled from
  // their prefill's logits.
  void start_rows(const Admitted& a) {
    at::Tensor idx = at::tensor(a.rows, at::kLong).to(m_.device());
    std::vector<int64_t> caps;
    for (int64_t r : a.rows) caps.push_back(table_.cap(table_.sequence(r)));
    live_B_.index_fill_(0, idx, true);
    count_B_.index_fill_(0, idx, 0);
    cap_B_.index_copy_(0, idx, at::tensor(caps, at::kLong).to(m_.device()));
    step_.slot_B.index_fill_(0, idx, a.prompt_slots);
    pending_rows_ = idx;
    pending_logits_ = a.logits_BV.contiguous();
    if (!had_rows_) {  // the first window samples every row from these logits alone
      pending_logits_ = a.logits_at_rows(cache_.batch()).contiguous();
      pending_rows_ = at::arange(cache_.batch(), idx.options());
      had_rows_ = true;
    }
  }

  // kWindow steps: decode (except where every row's logits come from a prefill), sample, and
  // the per-row stop bookkeeping, all on the device; then the host takes the window.
  void run_window(bool use_graph, int64_t& steps_done) {
    for (int64_t j = 0; j < kWindow; ++j) {
      if (config_.cancel && config_.cancel()) throw GenerationCancelled(steps_done);  // host-side
      at::Tensor logits;
      decoded_[j] = !prefill_only_;
      if (decoded_[j]) {
        logits = decode(use_graph);
        if (routes_.defined()) routes_.select(0, j).copy_(step_.routing_LBK);
        step_.slot_B.add_(step_.active_B.to(at::kLong));
        cache_.next_pos.add_(step_.active_B.to(at::kLong));
      }
      if (pending_rows_.defined()) {  // rows refilled before this window: their first token
        logits = logits.defined() ? logits.index_copy(0, pending_rows_, pending_logits_) : pending_logits_;
        pending_rows_ = pending_logits_ = at::Tensor();
      }
      prefill_only_ = false;
      sample_into(logits, j);
      ++steps_done;
    }
    harvest();
  }

  void set_prefill_only() { prefill_only_ = true; }
  // The model's weights changed in place (a stream's new version): the step's derived copies
  // follow, in place, so a captured graph stays valid.
  void reload_weights() { step_.reload_weights(); }
  bool used_graph() const { return graph_ != nullptr; }

 private:
  at::Tensor decode(bool use_graph) {
    if (use_graph && !graph_ && !graph_failed_) {
      graph_ = capture_decode(step_, graph_logits_);
      graph_failed_ = graph_ == nullptr;
    }
    if (!graph_) return step_.run();
    graph_->replay();
    return graph_logits_;
  }

  void sample_into(const at::Tensor& logits, int64_t j) {
    Sampled smp = sample(logits, config_.sampling, gen_, config_.seed, draw_);
    const at::Tensor idle = live_B_.logical_not();
    at::Tensor tok = smp.tok.masked_fill(idle, config_.pad_id);
    toks_.select(1, j).copy_(tok);
    lps_.select(1, j).copy_(smp.lp);
    slps_.select(1, j).copy_(smp.slp);
    count_B_.add_(live_B_.to(at::kLong));
    live_B_.logical_and_(at::isin(tok, eos_).logical_or(count_B_.ge(cap_B_)).logical_not());
    // Next step's inputs: rows that ended (or hold nothing) feed a masked pad.
    step_.tok_B.copy_(tok.masked_fill(live_B_.logical_not(), config_.pad_id));
    step_.active_B.copy_(live_B_);
  }

  // The window's tokens to the host, row by row into the table; rows the host ended (a stop
  // string) stop on the device too.
  void harvest() {
    const at::Tensor toks = toks_.cpu(), lps = lps_.cpu(), slps = slps_.cpu();
    const at::Tensor routes = routes_.defined() ? routes_.to(at::kInt).cpu().contiguous() : at::Tensor();
    const int64_t R = table_.rows();
    const int64_t* tk = toks.data_ptr<int64_t>();
    const float* lp = lps.data_ptr<float>();
    const float* slp = slps.data_ptr<float>();
    const bool greedy = config_.sampling.greedy;
    std::vector<int64_t> busy(R, 0);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t j = 0; j < kWindow && table_.busy(r); ++j) {
        const Generation& g = table_.output(table_.sequence(r));
        if (routes.defined() && decoded_[j] && !g.tokens.empty()) {  // this step fed the row's last token
          std::vector<uint16_t> ids(L_ * K_);
          const int32_t* p = routes.data_ptr<int32_t>();  // [kWindow, L, R, K]
          for (int64_t l = 0; l < L_; ++l) {
            for (int64_t k = 0; k < K_; ++k) ids[l * K_ + k] = static_cast<uint16_t>(p[((j * L_ + l) * R + r) * K_ + k]);
          }
          rec_->append(r, ids);
        }
        const int64_t at = r * kWindow + j;
        const int64_t ended = table_.push(r, tk[at], lp[at], greedy ? 0.f : slp[at]);
        if (ended >= 0 && rec_ != nullptr) table_.output(ended).routed_experts = rec_->take(r);
      }
      busy[r] = table_.busy(r) ? 1 : 0;
    }
    const at::Tensor keep = at::tensor(busy, at::kLong).to(m_.device()).to(at::kBool);
    live_B_.logical_and_(keep);
    step_.active_B.logical_and_(keep);
  }

  Model& m_;
  KvCache& cache_;
  const GenerateConfig& config_;
  SlotTable& table_;
  RoutingRecorder* rec_;
  DecodeStep step_;
  at::Generator gen_;
  at::Tensor eos_, toks_, lps_, slps_, live_B_, count_B_, cap_B_, routes_;
  at::Tensor pending_rows_, pending_logits_;
  int64_t L_ = 0, K_ = 0;
  uint64_t draw_ = 0;  // sample_rows calls so far
  bool decoded_[kWindow] = {};
  bool prefill_only_ = false, graph_failed_ = false, had_rows_ = false;
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  at::Tensor graph_logits_;
};

}  // namespace

std::vector<Generation> fast_generate(Model& m, const std::vector<std::vector<int64_t>>& prompts,
                                      const GenerateConfig& config, bool use_graph, FastGenerateStats* stats) {
  FastGenerateStats local;
  FastGenerateStats& st = stats ? *stats : local;
  config.sampling.validate();
  if (!fast_generate_accepts(m, config)) {
    st.fell_back = true;
    return generate(m, prompts, config);
  }
  check_prompts(prompts);
  c10::InferenceMode guard;
  const int64_t Q = static_cast<int64_t>(prompts.size());
  if (Q == 0) return {};
  SlotTable table(Q, decode_rows(Q, config), config);
  RoutingRecorder recorder(table.rows());
  RoutingRecorder* rec = config.record_routing ? &recorder : nullptr;
  KvCache cache;
  std::vector<std::vector<int64_t>> all = prompts;  // and those a stream feeds
  const int64_t room = prompt_room(prompts, config);
  const Admitted head = admit_waiting(m, cache, table, all, config, rec);  // makes the cache
  GraphDecoder dec(m, cache, config, table, rec);
  dec.start_rows(head);
  dec.set_prefill_only();
  int64_t steps = 0;
  DecodeMeter meter(table.rows());
  while (true) {
    meter.enter(DecodePhase::kDecode);
    dec.run_window(use_graph, steps);
    if (stream_exchange(table, all, config, room, &meter)) dec.reload_weights();
    if (table.running() == 0 && !table.waiting()) break;
    meter.enter(DecodePhase::kAdmit);
    const Admitted refill = admit_waiting(m, cache, table, all, config, rec);
    if (!refill.rows.empty()) dec.start_rows(refill);
    meter.count(steps, table.tokens());
  }
  st.used_graph = dec.used_graph();
  st.steps = steps;
  return table.take();
}

int64_t graph_capture_failures() { return capture_failures.load(); }

}  // namespace moerl::model::cuda
