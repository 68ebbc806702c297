#include "train/adamw.h"

#include <algorithm>
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
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : params_) names_.push_back(name), list_.push_back(p);
  for (TensorRun& r : contiguous_runs(list_)) {
    const at::Tensor& p0 = list_[r.members[0]];
    Run run{std::move(r), {}, {}, {}};
    const int64_t n = run.params.flat.numel();
    const auto f32 = p0.options().dtype(at::kFloat).requires_grad(false);
    run.exp_avg = at::zeros({n}, f32);
    run.exp_avg_sq = at::zeros({n}, f32);
    const std::vector<at::Tensor> m = views_of(run.exp_avg, run.params, list_);
    const std::vector<at::Tensor> v = views_of(run.exp_avg_sq, run.params, list_);
    std::vector<at::Tensor> w;
    if (is_low_precision(p0)) {
      run.master = at::empty({n}, f32);
      w = views_of(run.master, run.params, list_);
    }
    for (size_t i = 0; i < run.params.members.size(); ++i) {
      const size_t k = run.params.members[i];
      exp_avg_[names_[k]] = m[i];
      exp_avg_sq_[names_[k]] = v[i];
      if (!w.empty()) master_[names_[k]] = w[i].copy_(list_[k].detach());
    }
    runs_.push_back(std::move(run));
  }
}

std::vector<at::Tensor> AdamW::grads() const {
  std::vector<at::Tensor> g;
  for (const at::Tensor& p : list_) g.push_back(p.grad());
  return g;
}

double AdamW::clip_grad_norm(double max_norm) {
  at::NoGradGuard no_grad;
  const std::vector<TensorRun> runs = contiguous_runs(grads());
  std::vector<at::Tensor> sqs;  // per run of gradients, on its device
  for (const TensorRun& r : runs) sqs.push_back(sum_of_squares(r.flat));
  const double norm = std::sqrt(sum_on_host(sqs));
  if (max_norm > 0 && norm > max_norm) {
    double scale = max_norm / (norm + 1e-6);
    for (const TensorRun& r : runs) r.flat.mul_(scale);
  }
  return norm;
}

namespace {

struct StepConstants {
  const AdamWConfig& cfg;
  double lr, bc1, bc2;
};

// One AdamW update of parameter p (its float32 master w where defined) by gradient g, with
// moments m and v; elementwise, so it applies to a tensor or to a flat run of them alike.
void update(at::Tensor p, const at::Tensor& g, at::Tensor m, at::Tensor v, at::Tensor w, const StepConstants& k) {
  const AdamWConfig& c = k.cfg;
  at::Tensor g32 = g.to(at::kFloat);
  m.mul_(c.beta1).add_(g32, 1.0 - c.beta1);
  v.mul_(c.beta2).addcmul_(g32, g32, 1.0 - c.beta2);
  at::Tensor denom = (v / k.bc2).sqrt_().add_(c.eps);
  at::Tensor step = (m / k.bc1) / denom;
  at::Tensor& target = w.defined() ? w : p;  // what the update lands on
  if (c.weight_decay > 0) target.mul_(1.0 - k.lr * c.weight_decay);
  target.sub_(step.to(target.scalar_type()), k.lr);
  if (w.defined()) p.copy_(w);  // round the float32 master into the parameter
}

// update() over a flat run in chunks, so its float32 temporaries stay ~1 GB at most.
void update_flat(const at::Tensor& p, const at::Tensor& g, const at::Tensor& m, const at::Tensor& v,
                 const at::Tensor& w, const StepConstants& k) {
  constexpr int64_t kChunk = int64_t{1} << 26;
  const int64_t n = p.numel();
  for (int64_t s = 0; s < n; s += kChunk) {
    const int64_t len = std::min(kChunk, n - s);
    update(p.narrow(0, s, len), g.narrow(0, s, len), m.narrow(0, s, len), v.narrow(0, s, len),
           w.defined() ? w.narrow(0, s, len) : at::Tensor(), k);
  }
}

}  // namespace

void AdamW::step(double lr) {
  at::NoGradGuard no_grad;
  ++step_;
  const StepConstants k{cfg_, lr, 1.0 - std::pow(cfg_.beta1, static_cast<double>(step_)),
                        1.0 - std::pow(cfg_.beta2, static_cast<double>(step_))};
  for (Run& r : runs_) {
    std::vector<at::Tensor> g;
    for (size_t i : r.params.members) g.push_back(list_[i].grad());
    const std::vector<TensorRun> gruns = contiguous_runs(g);
    if (same_tiling(r.params, gruns)) {  // one pass over the whole run
      update_flat(r.params.flat, gruns[0].flat, r.exp_avg, r.exp_avg_sq, r.master, k);
      continue;
    }
    for (size_t i = 0; i < g.size(); ++i) {  // gradients missing or laid out otherwise
      if (!g[i].defined()) continue;
      const std::string& name = names_[r.params.members[i]];
      auto w = master_.find(name);
      update(list_[r.params.members[i]], g[i], exp_avg_.at(name), exp_avg_sq_.at(name),
             w == master_.end() ? at::Tensor() : w->second, k);
    }
  }
}

void AdamW::zero_grad() {
  for (const at::Tensor& p : list_) {
    if (p.grad().defined()) p.mutable_grad().detach_();
  }
  at::NoGradGuard no_grad;
  for (const TensorRun& r : contiguous_runs(grads())) r.flat.zero_();
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
    return it->second;
  };
  // Into the existing tensors: they are views of the runs' state.
  at::NoGradGuard no_grad;
  for (auto& [name, m] : exp_avg_) m.copy_(get("exp_avg." + name, m));
  for (auto& [name, v] : exp_avg_sq_) v.copy_(get("exp_avg_sq." + name, v));
  for (auto& [name, w] : master_) {
    // Older states have no masters: start them from the (restored) parameter.
    w.copy_(state.count("master." + name) ? get("master." + name, w) : params_.at(name).detach());
  }
  auto it = state.find("step");
  if (it == state.end()) throw Error("optimizer state: missing 'step'", "the checkpoint is incomplete");
  step_ = it->second.item<int64_t>();
}

}  // namespace moerl::train
