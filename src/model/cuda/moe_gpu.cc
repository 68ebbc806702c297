// GPU MoE experts: device-side expert sort, grouped GEMMs, fused SwiGLU, pack/combine
// kernels, each wrapped in a torch::autograd::Function so forward+backward stay on the GPU.
#include "model/cuda/moe_gpu.h"

#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <string>

#include "base/check.h"
#include "base/error.h"
#include "ep/cuda/ops.h"
#include "model/common/expert_grad.h"
#include "model/common/expert_pack.h"
#include "model/cuda/decode_kernels.h"
#include "model/cuda/expert_gemm.h"
#include "model/cuda/swiglu.h"

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 8)
#define MOERL_HAS_GROUPED_MM 1
#else
#define MOERL_HAS_GROUPED_MM 0
#endif

namespace moerl::model::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void check_launch(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw Error(std::string("model/cuda: ") + what + " failed: " + cudaGetErrorString(err),
                "inputs must be contiguous CUDA tensors on the current device", ErrorCode::kInternal);
  }
}

cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

struct PermuteFn : torch::autograd::Function<PermuteFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& src_token,
                            const at::Tensor& pos) {
    ctx->save_for_backward({pos});
    return ep::cuda::pack_rows(x, src_token);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    at::Tensor pos = ctx->get_saved_variables()[0];
    return {ep::cuda::weighted_combine(g[0].contiguous(), pos, at::Tensor()), at::Tensor(), at::Tensor()};
  }
};

struct CombineFn : torch::autograd::Function<CombineFn> {
  // w: float32 [T,K], 0 where the entry is dropped.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y, const at::Tensor& w, const at::Tensor& pos,
                            const at::Tensor& src_token, const at::Tensor& order) {
    ctx->save_for_backward({y, w, pos, src_token, order});
    return ep::cuda::weighted_combine(y, pos, w);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    auto s = ctx->get_saved_variables();
    at::Tensor dout = g[0].contiguous();
    at::Tensor scale = s[1].reshape({-1}).index_select(0, s[4]);
    at::Tensor dy = ep::cuda::pack_rows_scaled(dout, s[3], scale);
    at::Tensor dw = ep::cuda::row_dots(dout, s[0], s[2]);
    return {dy, dw, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct SwigluFn : torch::autograd::Function<SwigluFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gu_in) {
    at::Tensor gu = gu_in.contiguous();
    const int64_t inter = gu.size(1) / 2;
    at::Tensor h = at::empty({gu.size(0), inter}, gu.options());
    check_launch(swiglu_forward(gu.data_ptr(), gu.size(0), inter, gu.scalar_type() == at::kBFloat16, h.data_ptr(),
                                stream()),
                 "swiglu forward");
    ctx->save_for_backward({gu});
    return h;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    at::Tensor gu = ctx->get_saved_variables()[0];
    at::Tensor dh = g[0].contiguous();
    at::Tensor dgu = at::empty_like(gu);
    check_launch(swiglu_backward(gu.data_ptr(), dh.data_ptr(), gu.size(0), gu.size(1) / 2,
                                 gu.scalar_type() == at::kBFloat16, dgu.data_ptr(), stream()),
                 "swiglu backward");
    return {dgu};
  }
};

void need_cuda(const at::Tensor& t, const char* name) {
  if (!t.defined() || !t.is_cuda()) {
    throw Error(std::string("model/cuda: ") + name + " must be a CUDA tensor", "build the model with device cuda");
  }
}

}  // namespace

bool has_grouped_mm() { return MOERL_HAS_GROUPED_MM; }

namespace {

// grouped_experts' choice of expert_gemm: no autograd, bf16 contiguous weights of sizes it
// takes, and at most kExpertGemmMaxMeanRows rows per expert on average (decode batches).
bool decode_sized(const at::Tensor& x, const at::Tensor& idx, const at::Tensor& w13, const at::Tensor& w2) {
  const int64_t E = w13.size(0), H = x.size(1), I = w2.size(2);
  auto aligned = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
  return decode_kernels().experts && !at::GradMode::is_enabled() && x.scalar_type() == at::kBFloat16 &&
         w13.scalar_type() == at::kBFloat16 && w2.scalar_type() == at::kBFloat16 && w13.is_contiguous() &&
         w2.is_contiguous() && aligned(w13) && aligned(w2) && E <= kExpertPlanMaxExperts &&
         idx.numel() <= kExpertGemmMaxMeanRows * E && expert_gemm_fits(I, H, true) && expert_gemm_fits(H, I, false);
}

// grouped_experts at decode sizes: one launch plans the rows, expert_gemm reads the tokens in
// place with SwiGLU fused, weighted_combine sums each token's entries.
at::Tensor decode_experts(const at::Tensor& x_NH, const at::Tensor& idx_NK, const at::Tensor& w_NK,
                          const at::Tensor& w13, const at::Tensor& w2) {
  const int64_t T = idx_NK.size(0), K = idx_NK.size(1), M = T * K, E = w13.size(0), H = x_NH.size(1),
                I = w2.size(2);
  at::Tensor x = x_NH.contiguous();
  if (reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 != 0) x = x.clone();  // a view at an odd offset
  const at::Tensor idx = idx_NK.to(at::kLong).contiguous();
  const bool bf16 = w_NK.scalar_type() == at::kBFloat16;
  const at::Tensor gate = bf16 ? w_NK.contiguous() : w_NK.to(at::kFloat).contiguous();
  auto lopt = idx.options();
  at::Tensor offs = at::empty({E}, lopt.dtype(at::kInt)), src = at::empty({M}, lopt), pos = at::empty({T, K}, lopt);
  at::Tensor wf = at::empty({T, K}, lopt.dtype(at::kFloat));
  check_launch(expert_plan(idx.data_ptr<int64_t>(), gate.data_ptr(), bf16, T, K, E, offs.data_ptr<int32_t>(),
                           src.data_ptr<int64_t>(), pos.data_ptr<int64_t>(), wf.data_ptr<float>(), stream()),
               "expert plan");
  at::Tensor h = at::empty({M, I}, x.options()), yp = at::empty({M, H}, x.options());
  check_launch(expert_gemm(x.data_ptr(), src.data_ptr<int64_t>(), w13.data_ptr(), offs.data_ptr<int32_t>(), E, I, H,
                           /*swiglu=*/true, h.data_ptr(), stream()),
               "expert gemm (gate/up)");
  check_launch(expert_gemm(h.data_ptr(), nullptr, w2.data_ptr(), offs.data_ptr<int32_t>(), E, H, I,
                           /*swiglu=*/false, yp.data_ptr(), stream()),
               "expert gemm (down)");
  return ep::cuda::weighted_combine(yp, pos, wf);
}

}  // namespace

ExpertSort sort_by_expert(const at::Tensor& topk_idx_TK, int64_t num_experts) {
  need_cuda(topk_idx_TK, "topk_idx");
  const int64_t T = topk_idx_TK.size(0), K = topk_idx_TK.size(1), M = T * K;
  at::Tensor flat = topk_idx_TK.reshape({-1}).to(at::kLong);
  at::Tensor dropped = flat.lt(0);
  at::Tensor key = flat.masked_fill(dropped, num_experts);  // dropped entries sort last
  ExpertSort s;
  auto sorted = at::sort(key, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  at::Tensor sorted_key = std::get<0>(sorted);
  s.order = std::get<1>(sorted);
  at::Tensor bounds = at::arange(1, num_experts + 1, flat.options());
  s.offs = at::searchsorted(sorted_key, bounds, /*out_int32=*/true, /*right=*/false);
  s.src_token = at::div(s.order, K, "floor");
  at::Tensor pos = at::empty({M}, flat.options());
  pos.scatter_(0, s.order, at::arange(M, flat.options()));
  s.pos_TK = pos.masked_fill_(dropped, -1).view({T, K});
  return s;
}

at::Tensor grouped_linear(const at::Tensor& x_MK, const at::Tensor& w_ENK, const at::Tensor& offs) {
#if MOERL_HAS_GROUPED_MM
  if (x_MK.scalar_type() == at::kBFloat16) return at::_grouped_mm(x_MK, w_ENK.transpose(1, 2), offs);
#endif
  // Fallback: one product per expert (host reads the offsets once).
  at::Tensor ends = offs.to(at::kCPU, at::kLong);
  const int64_t* e = ends.data_ptr<int64_t>();
  std::vector<at::Tensor> outs;
  int64_t start = 0;
  for (int64_t g = 0; g < ends.numel(); ++g) {
    outs.push_back(at::linear(x_MK.narrow(0, start, e[g] - start), w_ENK[g]));
    start = e[g];
  }
  if (start < x_MK.size(0)) outs.push_back(at::zeros({x_MK.size(0) - start, w_ENK.size(1)}, x_MK.options()));
  return at::cat(outs, 0);
}

at::Tensor swiglu(const at::Tensor& gu_M2I) {
  need_cuda(gu_M2I, "gu");
  return SwigluFn::apply(gu_M2I);
}

at::Tensor grouped_experts(const at::Tensor& x_NH, const at::Tensor& topk_idx_NK, const at::Tensor& topk_w_NK,
                           const at::Tensor& w13_E2IH, const at::Tensor& w2_EHI) {
  need_cuda(x_NH, "x");
  const int64_t E = w13_E2IH.size(0);
  if (w2_EHI.size(0) != E || w13_E2IH.size(2) != x_NH.size(1) || w2_EHI.size(1) != x_NH.size(1) ||
      w13_E2IH.size(1) != 2 * w2_EHI.size(2)) {
    throw Error("model/cuda: expert weights do not match: w13 [E,2I,H] and w2 [E,H,I] with H=" +
                    std::to_string(x_NH.size(1)),
                "stack gate;up into w13 and down into w2 (expert_stacks)");
  }
  if (x_NH.size(0) == 0) return at::zeros_like(x_NH);
  if (decode_sized(x_NH, topk_idx_NK, w13_E2IH, w2_EHI)) {
    return decode_experts(x_NH, topk_idx_NK, topk_w_NK, w13_E2IH, w2_EHI);
  }
  ExpertSort s = sort_by_expert(topk_idx_NK, E);
  at::Tensor w = topk_w_NK.to(at::kFloat).masked_fill(topk_idx_NK.lt(0), 0.f);
  at::Tensor xp = PermuteFn::apply(x_NH.contiguous(), s.src_token, s.pos_TK);
  at::Tensor gu = grouped_linear(xp, w13_E2IH, s.offs);
  at::Tensor h = swiglu(gu);
  at::Tensor yp = grouped_linear(h, w2_EHI, s.offs);
  return CombineFn::apply(yp.contiguous(), w, s.pos_TK, s.src_token, s.order);
}

MoeOutput moe_block(const MoeBlockWeights& w, const at::Tensor& x_TH, const RouterConfig& cfg) {
  need_cuda(x_TH, "x");
  MoeOutput o;
  o.router_logits_TE = at::linear(x_TH, w.router_EH);
  route(o.router_logits_TE, cfg, &o.topk_idx_TK, &o.topk_weight_TK);
  o.y_TH = grouped_experts(x_TH, o.topk_idx_TK, o.topk_weight_TK, w.w13_E2IH, w.w2_EHI);
  return o;
}

namespace {

std::pair<at::Tensor, at::Tensor> stack_experts(const std::vector<ExpertWeights>& experts) {
  std::vector<at::Tensor> gates, ups, downs;
  for (const auto& e : experts) {
    gates.push_back(e.gate_IH);
    ups.push_back(e.up_IH);
    downs.push_back(e.down_HI);
  }
  return {at::cat({at::stack(gates), at::stack(ups)}, 1), at::stack(downs)};
}

// Inference-only cache of stacked weights, keyed by the tensors and their version counters
// (an in-place weight update, e.g. load_weights, bumps the version and restacks).
struct StackCache {
  std::vector<const void*> ptrs;
  std::vector<int64_t> versions;
  at::Tensor w13, w2;
};

std::vector<StackCache>& caches() {
  static std::vector<StackCache> c;
  return c;
}

}  // namespace

std::pair<at::Tensor, at::Tensor> expert_stacks(const std::vector<ExpertWeights>& experts) {
  if (at::GradMode::is_enabled()) {
    // Packed experts: the parameters' own storage, grads added into one packed buffer.
    if (PackedExperts p = packed_for_grad(experts); p.w13_E2IH.defined()) return {p.w13_E2IH, p.w2_EHI};
    return stack_experts(experts);  // loose experts: a differentiable stack
  }
  if (PackedExperts p = packed_view(experts); p.w13_E2IH.defined()) return {p.w13_E2IH, p.w2_EHI};
  std::vector<const void*> ptrs;
  std::vector<int64_t> versions;
  for (const auto& e : experts) {
    for (const at::Tensor* t : {&e.gate_IH, &e.up_IH, &e.down_HI}) {
      ptrs.push_back(t->data_ptr());
      versions.push_back(t->is_inference() ? 0 : static_cast<int64_t>(t->_version()));
    }
  }
  for (auto& c : caches())
    if (c.ptrs == ptrs && c.versions == versions) return {c.w13, c.w2};
  auto [w13, w2] = stack_experts(experts);
  if (caches().size() > 64) caches().clear();
  caches().push_back({ptrs, versions, w13, w2});
  return {w13, w2};
}

namespace {

at::Tensor cuda_local_experts(const std::vector<ExpertWeights>& experts, const at::Tensor& x_NH,
                              const at::Tensor& topk_idx_NK, const at::Tensor& topk_weight_NK) {
  if (!x_NH.is_cuda() || x_NH.scalar_type() != at::kBFloat16 || experts.empty()) return at::Tensor();
  auto [w13, w2] = expert_stacks(experts);
  return grouped_experts(x_NH, topk_idx_NK, topk_weight_NK, w13, w2).to(x_NH.scalar_type());
}

}  // namespace

void install_cuda_experts() { set_local_experts_hook(&cuda_local_experts); }

}  // namespace moerl::model::cuda
