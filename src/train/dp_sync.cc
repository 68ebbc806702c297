// DataParallel over c10d ProcessGroupGloo: flat all-reduce of dense gradients, global-norm
// clipping across expert shards, metric averaging, and small string exchange via the store.
#include "train/dp_sync.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <chrono>
#include <cmath>

#include "base/env.h"
#include "base/error.h"
#include "ep/torch/world.h"

namespace moerl::train {

bool is_expert_param(const std::string& name) { return name.find(".mlp.experts.") != std::string::npos; }

struct DataParallel::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  std::chrono::milliseconds timeout{0};
};

DataParallel::DataParallel(int rank, int world_size, std::unique_ptr<Impl> impl)
    : rank_(rank), world_size_(world_size), impl_(std::move(impl)) {}

DataParallel::~DataParallel() = default;

std::shared_ptr<DataParallel> DataParallel::join(double timeout_s) {
  ep::detail::World w = ep::detail::join_world("dp", timeout_s);
  auto impl = std::make_unique<Impl>();
  impl->timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  auto opts = c10d::ProcessGroupGloo::Options::create(impl->timeout);
  const std::string addr = env::rendezvous().master_addr;
  const bool local = addr.rfind("127.", 0) == 0 || addr == "localhost";
  opts->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                : c10d::ProcessGroupGloo::createDefaultDevice());
  opts->threads = 1;
  impl->store = w.store;
  try {
    impl->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(w.store, w.rank, w.world_size, opts);
  } catch (const std::exception& e) {
    throw Error("data parallel: rank " + std::to_string(w.rank) + " of " + std::to_string(w.world_size) +
                    " cannot form the gloo group: " + e.what(),
                "start every rank with `moerl launch -n N`; a peer may have died", ErrorCode::kUnavailable);
  }
  return std::shared_ptr<DataParallel>(new DataParallel(w.rank, w.world_size, std::move(impl)));
}

void DataParallel::allreduce(at::Tensor& t, const char* what) {
  try {
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::SUM;
    impl_->pg->allreduce(v, o)->wait();
  } catch (const std::exception& e) {
    throw Error("data parallel rank " + std::to_string(rank_) + " of " + std::to_string(world_size_) + ": " + what +
                    " all-reduce failed: " + e.what(),
                "a peer is dead, hung, or made a different sequence of collective calls; check its log",
                ErrorCode::kTimeout);
  }
}

double DataParallel::sync_gradients(const std::map<std::string, at::Tensor>& params, double max_norm) {
  at::NoGradGuard no_grad;
  const double inv_r = 1.0 / world_size_;
  // Dense: which gradients exist anywhere (so every rank flattens the same list).
  std::vector<const at::Tensor*> dense;
  for (const auto& [name, p] : params) {
    if (!is_expert_param(name)) dense.push_back(&p);
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
    at::Tensor buf = at::cat(flat).to(at::kCPU);  // Gloo reduces host memory; GPU grads come back below
    allreduce(buf, "dense gradient");
    buf.mul_(inv_r);
    int64_t off = 0;
    for (size_t i : used) {
      at::Tensor& g = const_cast<at::Tensor&>(*dense[i]).mutable_grad();
      g.copy_(buf.narrow(0, off, g.numel()).view(g.sizes()));
      off += g.numel();
      dense_sq += g.to(at::kDouble).pow(2).sum().item<double>();
    }
  }
  // Experts: every rank's tokens already contributed through combine/dispatch backward.
  std::vector<at::Tensor> expert_sqs;
  for (const auto& [name, p] : params) {
    if (!is_expert_param(name) || !p.grad().defined()) continue;
    at::Tensor& g = const_cast<at::Tensor&>(p).mutable_grad();
    g.mul_(inv_r);
    expert_sqs.push_back(g.to(at::kDouble).pow(2).sum().to(at::kCPU));
  }
  at::Tensor expert_sq = expert_sqs.empty() ? at::zeros({1}, at::kDouble) : at::stack(expert_sqs).sum().reshape({1});
  allreduce(expert_sq, "expert gradient norm");
  double norm = std::sqrt(dense_sq + expert_sq.item<double>());
  if (max_norm > 0 && norm > max_norm) {  // NOTE: same formula as AdamW::clip_grad_norm
    double scale = max_norm / (norm + 1e-6);
    for (const auto& [name, p] : params) {
      if (p.grad().defined()) const_cast<at::Tensor&>(p).mutable_grad().mul_(scale);
    }
  }
  return norm;
}

std::vector<double> DataParallel::sum(const std::vector<double>& values) {
  if (values.empty()) return {};
  at::Tensor t = at::tensor(values, at::kDouble);
  allreduce(t, "metric");
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

std::vector<double> DataParallel::mean(const std::vector<double>& values) {
  std::vector<double> s = sum(values);
  for (double& v : s) v /= world_size_;
  return s;
}

bool DataParallel::all(bool local) { return sum({local ? 1.0 : 0.0})[0] == world_size_; }

std::function<bool(bool)> DataParallel::all_done_fn() {
  return [this](bool local) { return all(local); };
}

void DataParallel::barrier(const std::string& what) {
  at::Tensor t = at::zeros({1}, at::kFloat);
  allreduce(t, what.c_str());
}

std::vector<std::string> DataParallel::gather(const std::string& value) {
  const std::string base = "gather/" + std::to_string(seq_++) + "/";
  std::vector<std::string> out;
  try {
    if (rank_ != 0) {
      impl_->store->set(base + std::to_string(rank_), std::vector<uint8_t>(value.begin(), value.end()));
      return out;
    }
    out.push_back(value);
    for (int r = 1; r < world_size_; ++r) {
      std::vector<uint8_t> v = impl_->store->get(base + std::to_string(r));
      out.emplace_back(v.begin(), v.end());
      impl_->store->deleteKey(base + std::to_string(r));
    }
  } catch (const std::exception& e) {
    throw Error("data parallel rank " + std::to_string(rank_) + ": gather " + base + " failed: " + e.what(),
                "a peer is dead or hung; check its log", ErrorCode::kTimeout);
  }
  return out;
}

std::string DataParallel::broadcast(const std::string& value) {
  const std::string key = "broadcast/" + std::to_string(seq_++);
  try {
    if (rank_ == 0) {
      impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
      return value;
    }
    std::vector<uint8_t> v = impl_->store->get(key);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    throw Error("data parallel rank " + std::to_string(rank_) + ": broadcast " + key + " failed: " + e.what(),
                "a peer is dead or hung; check its log", ErrorCode::kTimeout);
  }
}

}  // namespace moerl::train
