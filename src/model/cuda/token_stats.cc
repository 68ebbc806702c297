// token_stats_forward/backward: argument checks, then the row kernels on the current stream.
#include "model/cuda/token_stats.h"

#include <c10/cuda/CUDAStream.h>

#include <string>

#include "base/error.h"
#include "model/cuda/token_stats_kernels.h"

namespace moerl::model::cuda {
namespace {

void check_rows(const char* what, const at::Tensor& z, const at::Tensor& targets,
                std::initializer_list<const at::Tensor*> per_row) {
  bool ok = z.is_cuda() && z.dim() == 2 && z.is_contiguous() &&
            (z.scalar_type() == at::kBFloat16 || z.scalar_type() == at::kFloat) && targets.dim() == 1 &&
            targets.scalar_type() == at::kLong && targets.is_contiguous() && targets.size(0) == z.size(0) &&
            targets.device() == z.device();
  for (const at::Tensor* t : per_row) {
    if (!t->defined()) continue;
    ok = ok && t->dim() == 1 && t->size(0) == z.size(0) && t->scalar_type() == at::kFloat && t->is_contiguous() &&
         t->device() == z.device();
  }
  if (!ok) {
    throw Error(std::string(what) + ": logits " + c10::str(z.sizes(), " ", z.scalar_type(), " ", z.device()) +
                    ", targets " + c10::str(targets.sizes(), " ", targets.scalar_type()) + " do not fit",
                "contiguous bf16/float32 CUDA logits [N,V], int64 targets [N], float32 [N] row tensors on one device",
                ErrorCode::kInternal);
  }
}

const float* ptr_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

void check_launch(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw Error(std::string(what) + ": kernel launch failed: " + cudaGetErrorString(e), "a CUDA error; see the log",
                ErrorCode::kInternal);
  }
}

}  // namespace

void token_stats_forward(const at::Tensor& z, const at::Tensor& targets, double inv_t, const at::Tensor& logp,
                         const at::Tensor& ent, const at::Tensor& lse) {
  check_rows("token_stats_forward", z, targets, {&logp, &ent, &lse});
  if (!logp.defined() || !lse.defined()) {
    throw Error("token_stats_forward: logp and lse outputs are required", "a bug in moerl", ErrorCode::kInternal);
  }
  check_launch(token_stats_forward(z.data_ptr(), z.size(0), z.size(1), z.scalar_type() == at::kBFloat16,
                                   targets.data_ptr<int64_t>(), static_cast<float>(inv_t), logp.data_ptr<float>(),
                                   ent.defined() ? ent.data_ptr<float>() : nullptr, lse.data_ptr<float>(),
                                   c10::cuda::getCurrentCUDAStream()),
               "token_stats_forward");
}

void token_stats_backward(const at::Tensor& z, const at::Tensor& targets, const at::Tensor& lse,
                          const at::Tensor& g_logp, const at::Tensor& g_ent, const at::Tensor& ent, double inv_t) {
  check_rows("token_stats_backward", z, targets, {&lse, &g_logp, &g_ent, &ent});
  if (!lse.defined() || !g_logp.defined() || g_ent.defined() != ent.defined()) {
    throw Error("token_stats_backward: lse and g_logp are required, g_ent and ent go together", "a bug in moerl",
                ErrorCode::kInternal);
  }
  check_launch(token_stats_backward(z.data_ptr(), z.size(0), z.size(1), z.scalar_type() == at::kBFloat16,
                                    targets.data_ptr<int64_t>(), lse.data_ptr<float>(), g_logp.data_ptr<float>(),
                                    ptr_or_null(g_ent), ptr_or_null(ent), static_cast<float>(inv_t),
                                    c10::cuda::getCurrentCUDAStream()),
               "token_stats_backward");
}

}  // namespace moerl::model::cuda
