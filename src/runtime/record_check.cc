// Trainer-boundary checks of experience records (see record_check.h).
#include "runtime/record_check.h"

#include <cmath>

#include "base/error.h"

namespace moerl::runtime {
namespace {

std::string check_tokens(const std::vector<int32_t>& ids, const char* what, int64_t vocab) {
  if (vocab <= 0) return "";
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || ids[t] >= vocab) {
      return std::string(what) + " token " + std::to_string(t) + " is id " + std::to_string(ids[t]) +
             ", outside the vocabulary [0, " + std::to_string(vocab) + ")";
    }
  }
  return "";
}

std::string check_sample(const Sample& s, const RecordLimits& lim) {
  if (std::string why = check_tokens(s.prompt_tokens, "prompt", lim.vocab_size); !why.empty()) return why;
  if (std::string why = check_tokens(s.response_tokens, "response", lim.vocab_size); !why.empty()) return why;
  if (s.prompt_tokens.empty()) return "the prompt is empty";
  for (size_t t = 0; t < s.behaviour_logprobs.size(); ++t) {
    const float lp = s.behaviour_logprobs[t];
    if (!std::isfinite(lp)) {
      return "behaviour logprob of response token " + std::to_string(t) + " is " + std::to_string(lp) +
             " (need a finite value)";
    }
  }
  for (const VersionSpan& span : s.version_spans) {
    if (lim.check_version && span.version > lim.max_version) {
      return "version span at token " + std::to_string(span.start) + " claims policy version " +
             std::to_string(span.version) + ", newer than the newest published, " + std::to_string(lim.max_version);
    }
  }
  if (!s.routed_experts.empty()) {
    if ((lim.routing_layers && s.routing_layers != lim.routing_layers) ||
        (lim.routing_top_k && s.routing_top_k != lim.routing_top_k)) {
      return "routing replay is " + std::to_string(s.routing_layers) + " layers x top-" +
             std::to_string(s.routing_top_k) + ", the model has " + std::to_string(lim.routing_layers) +
             " MoE layers x top-" + std::to_string(lim.routing_top_k);
    }
    for (size_t k = 0; lim.num_experts && k < s.routed_experts.size(); ++k) {
      if (s.routed_experts[k] >= lim.num_experts) {
        return "routing replay entry " + std::to_string(k) + " is expert " + std::to_string(s.routed_experts[k]) +
               ", outside [0, " + std::to_string(lim.num_experts) + ")";
      }
    }
  }
  return "";
}

}  // namespace

std::string check_record(const ExperienceRecord& r, const RecordLimits& limits) {
  try {
    validate(r);
  } catch (const Error& e) {
    return e.message();
  }
  const std::string who = dedupe_key(r.task_id, r.attempt);
  if (r.samples.empty()) return who + ": no samples";
  if (limits.group_size && r.samples.size() != limits.group_size) {
    return who + ": " + std::to_string(r.samples.size()) + " samples, the group size is " +
           std::to_string(limits.group_size);
  }
  for (size_t i = 0; i < r.samples.size(); ++i) {
    if (std::string why = check_sample(r.samples[i], limits); !why.empty()) {
      return who + " sample " + std::to_string(i) + ": " + why;
    }
  }
  return "";
}

}  // namespace moerl::runtime
