// DataParallel: flat all-reduce of dense gradients and global-norm clipping across expert
// shards: dense gradients over the device's collective (NCCL on GPUs, Gloo on the CPU).
#include "train/dp_sync.h"

#include <cmath>

#include "model/expert_names.h"
#include "train/adamw.h"
#include "train/tensor_runs.h"

namespace moerl::train {

std::shared_ptr<DataParallel> DataParallel::join(double timeout_s) {
  return std::shared_ptr<DataParallel>(new DataParallel(timeout_s));
}

double DataParallel::sync_gradients(const std::map<std::string, at::Tensor>& params, double max_norm) {
  at::NoGradGuard no_grad;
  const double inv_r = 1.0 / world_size();
  // Dense: which gradients exist anywhere (so every rank flattens the same list).
  std::vector<const at::Tensor*> dense;
  for (const auto& [name, p] : params) {
    if (!model::is_routed_expert(name)) dense.push_back(&p);
  }
  at::Tensor defined = at::zeros({static_cast<int64_t>(dense.size())}, at::kFloat);
  float* has = defined.data_ptr<float>();
  for (size_t i = 0; i < dense.size(); ++i) has[i] = dense[i]->grad().defined() ? 1.f : 0.f;
  allreduce(defined, "gradient presence");
  std::vector<at::Tensor> flat;
  std::vector<size_t> used;
  at::ScalarType flat_type = at::kFloat;
  for (const at::Tensor* p : dense) {
    if (p->scalar_type() == at::kDouble) flat_type = at::kDouble;
  }
  for (size_t i = 0; i < dense.size(); ++i) {
    if (has[i] == 0.f) continue;
    at::Tensor& p = const_cast<at::Tensor&>(*dense[i]);
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    flat.push_back(p.grad().reshape({-1}).to(flat_type));
    used.push_back(i);
  }
  double dense_sq = 0;
  if (!flat.empty()) {
    at::Tensor buf = at::cat(flat);  // on the GPU: NCCL where the build has it, no host copy
    allreduce_tensor(buf, "dense gradient");
    buf.mul_(inv_r);
    int64_t off = 0;
    std::vector<at::Tensor> sqs;
    for (size_t i : used) {
      at::Tensor& g = const_cast<at::Tensor&>(*dense[i]).mutable_grad();
      g.copy_(buf.narrow(0, off, g.numel()).view(g.sizes()));
      off += g.numel();
      sqs.push_back(sum_of_squares(g));
    }
    dense_sq = sum_on_host(sqs);
  }
  // Experts: every rank's tokens already contributed through combine/dispatch backward.
  std::vector<at::Tensor> expert_grads;
  for (const auto& [name, p] : params) {
    if (model::is_routed_expert(name)) expert_grads.push_back(p.grad());
  }
  std::vector<at::Tensor> expert_sqs;
  for (const TensorRun& r : contiguous_runs(expert_grads)) {  // a layer's packed experts: one run
    r.flat.mul_(inv_r);
    expert_sqs.push_back(sum_of_squares(r.flat));
  }
  at::Tensor expert_sq =
      expert_sqs.empty() ? at::zeros({1}, at::kDouble) : at::stack(expert_sqs).to(at::kCPU).sum().reshape({1});
  allreduce(expert_sq, "expert gradient norm");
  double norm = std::sqrt(dense_sq + expert_sq.item<double>());
  if (max_norm > 0 && norm > max_norm) {  // NOTE: same formula as AdamW::clip_grad_norm
    double scale = max_norm / (norm + 1e-6);
    std::vector<at::Tensor> grads;
    for (const auto& [name, p] : params) grads.push_back(p.grad());
    for (const TensorRun& r : contiguous_runs(grads)) r.flat.mul_(scale);
  }
  return norm;
}

}  // namespace moerl::train
