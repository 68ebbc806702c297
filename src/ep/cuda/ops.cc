// Tensor wrappers for the CUDA EP kernels: validation, allocation, current stream.
#include "ep/cuda/ops.h"

#include <c10/cuda/CUDAStream.h>

#include <string>

#include "base/check.h"
#include "base/error.h"
#include "ep/cuda/kernels.h"

namespace moerl::ep::cuda {
namespace {

cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

void check_launch(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw Error(std::string("ep/cuda: ") + what + " launch failed: " + cudaGetErrorString(err),
                "check the inputs are CUDA tensors on the current device", ErrorCode::kInternal);
  }
}

void need_cuda(const at::Tensor& t, const char* name) {
  if (!t.defined() || !t.is_cuda()) {
    throw Error(std::string("ep/cuda: ") + name + " must be a CUDA tensor", "move it with .to(at::kCUDA)");
  }
}

at::Tensor index_arg(const at::Tensor& t, const char* name) {
  need_cuda(t, name);
  if (t.scalar_type() != at::kLong) {
    throw Error(std::string("ep/cuda: ") + name + " must be int64", "cast with .to(at::kLong)");
  }
  return t.contiguous();
}

DType row_dtype(const at::Tensor& t, const char* name) {
  if (t.scalar_type() == at::kBFloat16) return DType::kBFloat16;
  if (t.scalar_type() == at::kFloat) return DType::kFloat32;
  throw Error(std::string("ep/cuda: ") + name + " has dtype " + std::string(c10::toString(t.scalar_type())) +
                  ", expected bfloat16 or float32",
              "cast the activations to bf16 or f32");
}

at::Tensor rows_arg(const at::Tensor& t, const char* name) {
  need_cuda(t, name);
  if (t.dim() != 2) {
    throw Error(std::string("ep/cuda: ") + name + " must be 2-D [rows, H], got " + std::to_string(t.dim()) + " dims",
                "reshape to [rows, H]");
  }
  return t.contiguous();
}

}  // namespace

Layout compute_layout(const at::Tensor& topk_idx_TK, int64_t num_experts, int num_ranks) {
  at::Tensor idx = index_arg(topk_idx_TK, "topk_idx");
  if (idx.dim() != 2) throw Error("ep/cuda: topk_idx must be [T,K]", "pass the router's top-k ids");
  if (num_ranks <= 0 || num_experts % num_ranks != 0) {
    throw Error("ep/cuda: num_experts=" + std::to_string(num_experts) + " not divisible by ranks=" +
                    std::to_string(num_ranks),
                "use an expert count that the world size divides");
  }
  auto o = idx.options();
  Layout l;
  l.num_tokens_per_rank = at::empty({num_ranks}, o);
  l.num_tokens_per_expert = at::empty({num_experts}, o);
  l.is_token_in_rank = at::empty({idx.size(0), num_ranks}, o.dtype(at::kBool));
  at::Tensor bad = at::empty({1}, o);
  check_launch(cuda::compute_layout(idx.data_ptr<int64_t>(), idx.size(0), idx.size(1), num_experts, num_ranks,
                                    l.num_tokens_per_rank.data_ptr<int64_t>(),
                                    l.num_tokens_per_expert.data_ptr<int64_t>(),
                                    l.is_token_in_rank.data_ptr<bool>(), bad.data_ptr<int64_t>(), stream()),
               "layout");
  const int64_t n_bad = bad.item<int64_t>();
  if (n_bad != 0) {
    throw Error("ep/cuda: " + std::to_string(n_bad) + " topk_idx entries are outside [-1, " +
                    std::to_string(num_experts) + ")",
                "router ids must be global expert ids, -1 for none");
  }
  return l;
}

at::Tensor pack_rows(const at::Tensor& src_RH, const at::Tensor& rows) {
  at::Tensor src = rows_arg(src_RH, "src"), r = index_arg(rows, "rows");
  at::Tensor out = at::empty({r.numel(), src.size(1)}, src.options());
  check_launch(cuda::gather_rows(src.data_ptr(), src.size(1) * src.element_size(), r.data_ptr<int64_t>(), r.numel(),
                                 out.data_ptr(), stream()),
               "pack_rows");
  return out;
}

void unpack_rows(const at::Tensor& src_NH, const at::Tensor& rows, at::Tensor& dst_RH) {
  at::Tensor src = rows_arg(src_NH, "src"), r = index_arg(rows, "rows");
  need_cuda(dst_RH, "dst");
  if (!dst_RH.is_contiguous() || dst_RH.dim() != 2 || dst_RH.size(1) != src.size(1) ||
      dst_RH.scalar_type() != src.scalar_type() || r.numel() != src.size(0)) {
    throw Error("ep/cuda: unpack_rows needs a contiguous dst [R,H] of src's dtype and one row index per src row",
                "allocate dst with at::empty({R, H}, src.options())");
  }
  check_launch(cuda::scatter_rows(src.data_ptr(), src.size(1) * src.element_size(), r.data_ptr<int64_t>(), r.numel(),
                                  dst_RH.data_ptr(), stream()),
               "unpack_rows");
}

at::Tensor pack_rows_scaled(const at::Tensor& src_RH, const at::Tensor& rows, const at::Tensor& scale) {
  at::Tensor src = rows_arg(src_RH, "src"), r = index_arg(rows, "rows");
  need_cuda(scale, "scale");
  at::Tensor s = scale.to(at::kFloat).contiguous();
  MOERL_CHECK_EQ(s.numel(), r.numel());
  at::Tensor out = at::empty({r.numel(), src.size(1)}, src.options());
  check_launch(cuda::gather_rows_scaled(src.data_ptr(), row_dtype(src, "src"), src.size(1), r.data_ptr<int64_t>(),
                                        s.data_ptr<float>(), r.numel(), out.data_ptr(), stream()),
               "pack_rows_scaled");
  return out;
}

void accumulate_rows(const at::Tensor& rows_NH, const at::Tensor& token, at::Tensor& acc_TH) {
  at::Tensor rows = rows_arg(rows_NH, "rows"), t = index_arg(token, "token");
  need_cuda(acc_TH, "acc");
  if (acc_TH.scalar_type() != at::kFloat || !acc_TH.is_contiguous() || acc_TH.size(1) != rows.size(1)) {
    throw Error("ep/cuda: accumulate_rows needs a contiguous float32 acc [T,H]", "allocate it with at::zeros");
  }
  check_launch(cuda::accumulate_rows(rows.data_ptr(), row_dtype(rows, "rows"), rows.size(1), t.data_ptr<int64_t>(),
                                     t.numel(), acc_TH.data_ptr<float>(), stream()),
               "accumulate_rows");
}

at::Tensor weighted_combine(const at::Tensor& y_MH, const at::Tensor& pos_TK, const at::Tensor& w_TK) {
  at::Tensor y = rows_arg(y_MH, "y"), pos = index_arg(pos_TK, "pos");
  at::Tensor w;
  if (w_TK.defined()) {
    need_cuda(w_TK, "w");
    w = w_TK.to(at::kFloat).contiguous();
    MOERL_CHECK_EQ(w.numel(), pos.numel());
  }
  at::Tensor out = at::empty({pos.size(0), y.size(1)}, y.options());
  check_launch(cuda::weighted_combine(y.data_ptr(), row_dtype(y, "y"), y.size(1), pos.data_ptr<int64_t>(),
                                      w.defined() ? w.data_ptr<float>() : nullptr, pos.size(0), pos.size(1),
                                      out.data_ptr(), stream()),
               "weighted_combine");
  return out;
}

at::Tensor row_dots(const at::Tensor& a_TH, const at::Tensor& y_MH, const at::Tensor& pos_TK) {
  at::Tensor a = rows_arg(a_TH, "a"), y = rows_arg(y_MH, "y"), pos = index_arg(pos_TK, "pos");
  MOERL_CHECK_EQ(a.scalar_type(), y.scalar_type());
  MOERL_CHECK_EQ(a.size(1), y.size(1));
  at::Tensor dots = at::empty({pos.size(0), pos.size(1)}, a.options().dtype(at::kFloat));
  check_launch(cuda::row_dots(a.data_ptr(), y.data_ptr(), row_dtype(a, "a"), a.size(1), pos.data_ptr<int64_t>(),
                              pos.size(0), pos.size(1), dots.data_ptr<float>(), stream()),
               "row_dots");
  return dots;
}

}  // namespace moerl::ep::cuda
