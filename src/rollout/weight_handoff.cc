// In-memory weight versions for in-process rollout workers.
#include "rollout/weight_handoff.h"

#include <ATen/ATen.h>

#include "base/error.h"
#include "model/thread_stream.h"

namespace moerl::rollout {

namespace {
constexpr const char* kScheme = "memory:v";
}  // namespace

bool WeightHandoff::is_memory_location(const std::string& location) {
  return location.rfind(kScheme, 0) == 0;
}

std::string WeightHandoff::put(uint64_t version, const model::Model& policy) {
  auto snap = std::make_shared<WeightSnapshot>();
  snap->version = version;
  snap->config = policy.config();
  {
    at::NoGradGuard no_grad;
    for (const auto& [name, p] : policy.state()) snap->params.emplace(name, p.detach().clone());
  }
  // Workers read the copies on streams of their own (model/thread_stream.h): complete them first.
  model::synchronize_stream(policy.device());
  std::lock_guard<std::mutex> lock(mu_);
  if (!snapshots_.empty() && snapshots_.back()->version >= version) {
    throw Error("weight handoff: version " + std::to_string(version) + " is not newer than " +
                    std::to_string(snapshots_.back()->version),
                "publish versions in increasing order", ErrorCode::kInvalidInput);
  }
  snapshots_.push_back(std::move(snap));
  while (snapshots_.size() > keep_) snapshots_.pop_front();
  return kScheme + std::to_string(version);
}

std::shared_ptr<const WeightSnapshot> WeightHandoff::get(const std::string& location) const {
  if (!is_memory_location(location)) return nullptr;
  uint64_t version = 0;
  try {
    version = std::stoull(location.substr(std::char_traits<char>::length(kScheme)));
  } catch (const std::exception&) {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : snapshots_) {
    if (s->version == version) return s;
  }
  return nullptr;
}

}  // namespace moerl::rollout
