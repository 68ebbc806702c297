#include "train/adamw.h"

#include <cmath>
#include <vector>

#include "base/check.h"
#include "base/error.h"

namespace moerl::train {

namespace {

bool is_low_precision(const at::Tensor& p) {
  return p.scalar_type() == at::kBFloat16 || p.scalar_type() == at::kHalf;
}

}  // namespace

double sum_on_host(const std::vector<at::Tensor>& scalars) {
  if (scalars.empty()) return 0.0;
  const at::Tensor host = at::stack(scalars).to(at::kCPU, at::kDouble).contiguous();  // one read-back
  const double* v = host.data_ptr<double>();
  double total = 0.0;
  for (int64_t i = 0; i < host.numel(); ++i) total += v[i];  // in order
  return total;
}

AdamW::AdamW(std::map<std::string, at::Tensor> params, AdamWConfig cfg)
    : params_(std::move(params)), cfg_(cfg) {
  for (const auto& [name, p] : params_) {
    exp_avg_[name] = at::zeros_like(p, at::TensorOptions().dtype(at::kFloat));
    exp_avg_sq_[name] = at::zeros_like(p, at::TensorOptions().dtype(at::kFloat));
    if (is_low_precision(p)) master_[name] = p.detach().to(at::kFloat).clone();
  }
}

double AdamW::clip_grad_norm(double max_norm) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> sqs;  // per parameter, on its device
  for (auto& [name, p] : params_) {
    const at::Tensor& g = p.grad();
    if (g.defined()) sqs.push_back(g.to(at::kDouble).pow(2).sum());
  }
  const double norm = std::sqrt(sum_on_host(sqs));
  if (max_norm > 0 && norm > max_norm) {
    double scale = max_norm / (norm + 1e-6);
    for (auto& [name, p] : params_) {
      if (p.grad().defined()) p.mutable_grad().mul_(scale);
    }
  }
  return norm;
}

void AdamW::step(double lr) {
  at::NoGradGuard no_grad;
  ++step_;
  double bc1 = 1.0 - std::pow(cfg_.beta1, static_cast<double>(step_));
  double bc2 = 1.0 - std::pow(cfg_.beta2, static_cast<double>(step_));
  for (auto& [name, p] : params_) {
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    at::Tensor g32 = g.to(at::kFloat);
    at::Tensor& m = exp_avg_[name];
    at::Tensor& v = exp_avg_sq_[name];
    m.mul_(cfg_.beta1).add_(g32, 1.0 - cfg_.beta1);
    v.mul_(cfg_.beta2).addcmul_(g32, g32, 1.0 - cfg_.beta2);
    at::Tensor denom = (v / bc2).sqrt_().add_(cfg_.eps);
    at::Tensor update = (m / bc1) / denom;
    auto master = master_.find(name);
    at::Tensor& w = master == master_.end() ? p : master->second;  // what the update lands on
    if (cfg_.weight_decay > 0) w.mul_(1.0 - lr * cfg_.weight_decay);
    w.sub_(update.to(w.scalar_type()), lr);
    if (master != master_.end()) p.copy_(w);  // round the float32 master into the parameter
  }
}

void AdamW::zero_grad() {
  for (auto& [name, p] : params_) {
    if (p.grad().defined()) {
      p.mutable_grad().detach_();
      p.mutable_grad().zero_();
    }
  }
}

std::map<std::string, at::Tensor> AdamW::state() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, m] : exp_avg_) out["exp_avg." + name] = m;
  for (const auto& [name, v] : exp_avg_sq_) out["exp_avg_sq." + name] = v;
  for (const auto& [name, w] : master_) out["master." + name] = w;
  out["step"] = at::full({1}, step_, at::kLong);
  return out;
}

void AdamW::load_state(const std::map<std::string, at::Tensor>& state) {
  auto get = [&](const std::string& key, const at::Tensor& like) {
    auto it = state.find(key);
    if (it == state.end()) {
      throw Error("optimizer state: missing tensor '" + key + "'",
                  "the checkpoint's optimizer file does not match this model; start without --resume");
    }
    if (!it->second.sizes().equals(like.sizes())) {
      throw Error("optimizer state: '" + key + "' has the wrong shape",
                  "the checkpoint was written for another model configuration");
    }
    return it->second.to(like.device(), at::kFloat).clone();
  };
  for (auto& [name, m] : exp_avg_) m = get("exp_avg." + name, m);
  for (auto& [name, v] : exp_avg_sq_) v = get("exp_avg_sq." + name, v);
  for (auto& [name, w] : master_) {
    // Older states have no masters: start them from the (restored) parameter.
    w = state.count("master." + name) ? get("master." + name, w) : params_.at(name).detach().to(at::kFloat).clone();
  }
  auto it = state.find("step");
  if (it == state.end()) throw Error("optimizer state: missing 'step'", "the checkpoint is incomplete");
  step_ = it->second.item<int64_t>();
}

}  // namespace moerl::train
