// StaleFilter: split a trainer batch by policy lag and count what happened.
#include "runtime/staleness.h"

#include "base/error.h"

namespace moerl::runtime {

StalePolicy parse_stale_policy(const std::string& name) {
  if (name == "drop") return StalePolicy::kDrop;
  if (name == "regenerate") return StalePolicy::kRegenerate;
  throw Error("stale policy '" + name + "' is not one of drop, regenerate",
              "set runtime.stale_policy = \"drop\" or \"regenerate\"");
}

const char* stale_policy_name(StalePolicy p) {
  return p == StalePolicy::kDrop ? "drop" : "regenerate";
}

StaleSplit StaleFilter::apply(std::vector<ExperienceRecord> records, uint64_t current_version,
                              Accounting* acc) const {
  StaleSplit out;
  for (ExperienceRecord& r : records) {
    uint64_t lag = staleness(r, current_version);
    if (acc) acc->record_staleness(lag);
    if (lag <= max_staleness) {
      if (acc) acc->add(Counter::kTasksCompleted);
      out.keep.push_back(std::move(r));
      continue;
    }
    if (acc) {
      acc->add(Counter::kStaleDropped);
      acc->add(policy == StalePolicy::kDrop ? Counter::kTasksCompleted : Counter::kTasksRequeued);
    }
    out.stale.push_back(std::move(r));
  }
  return out;
}

}  // namespace moerl::runtime
