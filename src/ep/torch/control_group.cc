// ControlGroup over c10d ProcessGroupGloo: reductions of small host tensors, and byte strings
// moved as uint8 tensors (a length exchange first, then one padded payload collective).
#include "ep/torch/control_group.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/env.h"
#include "base/error.h"
#include "ep/torch/world.h"

namespace moerl::ep {

struct ControlGroup::Impl {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  detail::World world;
  double timeout_s = 0;
  DeviceAllReduce device;  // made on the first CUDA allreduce_tensor
  int64_t device_calls = 0;
};

namespace {

DeviceAllReduceFactory& device_factory() {
  static DeviceAllReduceFactory f;
  return f;
}

at::Tensor bytes_tensor(const std::string& s, int64_t size) {
  at::Tensor t = at::zeros({std::max<int64_t>(size, 1)}, at::kByte);
  if (!s.empty()) std::memcpy(t.data_ptr<uint8_t>(), s.data(), s.size());
  return t;
}

std::string tensor_bytes(const at::Tensor& t, int64_t size) {
  return std::string(reinterpret_cast<const char*>(t.data_ptr<uint8_t>()), static_cast<size_t>(size));
}

}  // namespace

std::shared_ptr<ControlGroup> ControlGroup::join(const std::string& kind, double timeout_s) {
  return std::shared_ptr<ControlGroup>(new ControlGroup(kind, timeout_s));
}

void register_device_allreduce(DeviceAllReduceFactory factory) { device_factory() = std::move(factory); }

ControlGroup::ControlGroup(const std::string& kind, double timeout_s) : impl_(std::make_unique<Impl>()) {
  detail::World w = detail::join_world(kind, timeout_s);
  impl_->world = w;
  impl_->timeout_s = timeout_s;
  rank_ = w.rank;
  world_size_ = w.world_size;
  auto opts = c10d::ProcessGroupGloo::Options::create(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  const std::string addr = env::rendezvous().master_addr;
  const bool local = addr.rfind("127.", 0) == 0 || addr == "localhost";
  opts->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                : c10d::ProcessGroupGloo::createDefaultDevice());
  opts->threads = 1;
  try {
    impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(w.store, w.rank, w.world_size, opts);
  } catch (const std::exception& e) {
    throw Error(kind + " group: rank " + std::to_string(w.rank) + " of " + std::to_string(w.world_size) +
                    " cannot form the gloo group: " + e.what(),
                "start every rank with `moerl launch`; a peer may have died", ErrorCode::kUnavailable);
  }
}

ControlGroup::~ControlGroup() = default;

void ControlGroup::collective(const char* what, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(rank_) + " of " + std::to_string(world_size_) + ": " + what +
                    " failed: " + e.what(),
                "a peer is dead, hung, or made a different sequence of collective calls; check its log",
                ErrorCode::kTimeout);
  }
}

void ControlGroup::allreduce(at::Tensor& t, const char* what, bool max) {
  collective(what, [&] {
    std::vector<at::Tensor> v{t};
    c10d::AllreduceOptions o;
    o.reduceOp = max ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
    impl_->pg->allreduce(v, o)->wait();
  });
}

void ControlGroup::allreduce_tensor(at::Tensor& t, const char* what) {
  if (world_size_ == 1) return;
  if (!t.is_cuda()) return allreduce(t, what);
  if (!impl_->device && device_factory()) {
    collective(what, [&] {
      impl_->device = device_factory()(detail::sub_world(impl_->world, "device", rank_, world_size_), impl_->timeout_s);
    });
  }
  if (impl_->device) {
    collective(what, [&] { impl_->device(t); });
    ++impl_->device_calls;
    return;
  }
  at::Tensor host = t.to(at::kCPU);
  allreduce(host, what);
  t.copy_(host);
}

int64_t ControlGroup::device_allreduces() const { return impl_->device_calls; }

std::vector<double> ControlGroup::sum(const std::vector<double>& values) {
  if (values.empty()) return {};
  at::Tensor t = at::tensor(values, at::kDouble);
  allreduce(t, "sum");
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

std::vector<double> ControlGroup::mean(const std::vector<double>& values) {
  std::vector<double> s = sum(values);
  for (double& v : s) v /= world_size_;
  return s;
}

std::vector<double> ControlGroup::max(const std::vector<double>& values) {
  if (values.empty()) return {};
  at::Tensor t = at::tensor(values, at::kDouble);
  allreduce(t, "max", /*max=*/true);
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

bool ControlGroup::all(bool local) { return sum({local ? 1.0 : 0.0})[0] == world_size_; }

bool ControlGroup::any(bool local) { return sum({local ? 1.0 : 0.0})[0] > 0; }

std::function<bool(bool)> ControlGroup::all_done_fn() {
  return [this](bool local) { return all(local); };
}

void ControlGroup::barrier(const std::string& what) {
  at::Tensor t = at::zeros({1}, at::kFloat);
  allreduce(t, what.c_str());
}

std::string ControlGroup::broadcast(const std::string& value) {
  at::Tensor n = at::tensor({lead() ? static_cast<int64_t>(value.size()) : int64_t{0}}, at::kLong);
  collective("broadcast (length)", [&] {
    std::vector<at::Tensor> v{n};
    impl_->pg->broadcast(v)->wait();
  });
  const int64_t size = n.item<int64_t>();
  if (size == 0) return {};
  at::Tensor payload = bytes_tensor(lead() ? value : std::string(), size);
  collective("broadcast", [&] {
    std::vector<at::Tensor> v{payload};
    impl_->pg->broadcast(v)->wait();
  });
  return tensor_bytes(payload, size);
}

std::vector<std::string> ControlGroup::gather(const std::string& value) {
  // Every rank's length, then one gather of payloads padded to the longest.
  at::Tensor mine = at::tensor({static_cast<int64_t>(value.size())}, at::kLong);
  std::vector<std::vector<at::Tensor>> lens_out(1);
  for (int r = 0; r < world_size_; ++r) lens_out[0].push_back(at::zeros({1}, at::kLong));
  collective("gather (lengths)", [&] {
    std::vector<at::Tensor> in{mine};
    impl_->pg->allgather(lens_out, in)->wait();
  });
  int64_t longest = 0;
  for (const at::Tensor& l : lens_out[0]) longest = std::max(longest, l.item<int64_t>());
  std::vector<std::string> out;
  if (longest == 0) {
    if (lead()) out.assign(static_cast<size_t>(world_size_), std::string());
    return out;
  }
  std::vector<at::Tensor> in{bytes_tensor(value, longest)};
  std::vector<std::vector<at::Tensor>> payloads;
  if (lead()) {
    payloads.resize(1);
    for (int r = 0; r < world_size_; ++r) payloads[0].push_back(at::zeros({longest}, at::kByte));
  }
  collective("gather", [&] {
    c10d::GatherOptions o;
    o.rootRank = 0;
    impl_->pg->gather(payloads, in, o)->wait();
  });
  if (!lead()) return out;
  for (int r = 0; r < world_size_; ++r) out.push_back(tensor_bytes(payloads[0][r], lens_out[0][r].item<int64_t>()));
  return out;
}

std::string ControlGroup::scatter(const std::vector<std::string>& values) {
  if (lead() && static_cast<int>(values.size()) != world_size_) {
    throw Error("scatter: rank 0 passed " + std::to_string(values.size()) + " parts for " +
                    std::to_string(world_size_) + " ranks",
                "pass one part per rank", ErrorCode::kInternal);
  }
  // Rank 0's lengths to every rank, then one scatter of payloads padded to the longest.
  at::Tensor lens = at::zeros({world_size_}, at::kLong);
  if (lead()) {
    for (int r = 0; r < world_size_; ++r) lens[r] = static_cast<int64_t>(values[r].size());
  }
  collective("scatter (lengths)", [&] {
    std::vector<at::Tensor> v{lens};
    impl_->pg->broadcast(v)->wait();
  });
  const int64_t longest = lens.max().item<int64_t>();
  const int64_t size = lens[rank_].item<int64_t>();
  if (longest == 0) return {};
  std::vector<at::Tensor> out{at::zeros({longest}, at::kByte)};
  std::vector<std::vector<at::Tensor>> in;
  if (lead()) {
    in.resize(1);
    for (const std::string& v : values) in[0].push_back(bytes_tensor(v, longest));
  }
  collective("scatter", [&] {
    c10d::ScatterOptions o;
    o.rootRank = 0;
    impl_->pg->scatter(out, in, o)->wait();
  });
  return tensor_bytes(out[0], size);
}

std::string ControlGroup::lead_runs(const std::string& what, const std::function<std::string()>& fn) {
  return lead_runs(what, [&](const Beat&) { return fn(); });
}

std::string ControlGroup::lead_runs(const std::string& what, const std::function<std::string(const Beat&)>& fn) {
  // Each broadcast carries "W" (a beat: still working), "R<result>" or
  // "E<code>\x1f<message>\x1f<hint>".
  constexpr char kSep = '\x1f';
  if (!lead()) {
    std::string msg;
    do {
      msg = broadcast(std::string());
    } while (msg == "W");
    if (!msg.empty() && msg[0] == 'R') return msg.substr(1);
    const size_t a = msg.find(kSep), b = a == std::string::npos ? a : msg.find(kSep, a + 1);
    if (msg.empty() || msg[0] != 'E' || b == std::string::npos) {
      throw Error("rank " + std::to_string(rank_) + ": " + what + ": rank 0 sent a malformed answer",
                  "ranks of one group must run the same moerl build", ErrorCode::kInternal);
    }
    throw Error("rank " + std::to_string(rank_) + ": rank 0 failed in " + what + ": " + msg.substr(a + 1, b - a - 1),
                msg.substr(b + 1), static_cast<ErrorCode>(std::stoi(msg.substr(1, a - 1))));
  }
  std::string result;
  try {
    result = fn([this] { broadcast("W"); });
  } catch (const Error& e) {
    broadcast("E" + std::to_string(static_cast<int>(e.code())) + kSep + e.message() + kSep + e.hint());
    throw;
  } catch (const std::exception& e) {
    broadcast("E" + std::to_string(static_cast<int>(ErrorCode::kInternal)) + kSep + e.what() + kSep);
    throw;
  }
  broadcast("R" + result);
  return result;
}

}  // namespace moerl::ep
