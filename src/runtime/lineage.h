// VersionLineage: the policy versions whose weights are in this trainer's history. Version
// numbers are never reused (a restarted trainer publishes above every version announced), so
// a version names the weights of exactly one trainer life; a record generated with a version
// outside the lineage comes from a life whose later steps were lost (it died after its last
// checkpoint) and is not trained. A resumed trainer's lineage is its checkpoint's (closed at
// the checkpoint's version) plus what it publishes itself.
//
//   VersionLineage l = VersionLineage::from_json(saved, state.policy_version);
//   l.begin(first_published);                  // after the first publication of this life
//   if (auto v = l.foreign_version(record)) ...  // *v is not ours: drop, re-create the task
//   checkpoint["lineage"] = l.to_json(state.policy_version);
// Plain value; not thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/records.h"

namespace moerl::runtime {

class VersionLineage {
 public:
  // The lineage a checkpoint saved (ranges [[first, last], ...]); a checkpoint of an older
  // build (no lineage: null) trusts every version up to `checkpoint_version`.
  static VersionLineage from_json(const nlohmann::json& saved, uint64_t checkpoint_version);
  // This life publishes `first_version` and everything above it (at least the checkpoint's).
  void begin(uint64_t first_version);
  bool contains(uint64_t version) const;
  // The oldest version one of the record's samples was generated with that is not ours.
  std::optional<uint64_t> foreign_version(const ExperienceRecord& record) const;
  // Ranges with this life's closed at `current_version`, for the checkpoint.
  nlohmann::json to_json(uint64_t current_version) const;
  std::string describe() const;  // "0-4, 7-" for messages

 private:
  std::vector<std::pair<uint64_t, uint64_t>> closed_;  // inclusive, ascending
  std::optional<uint64_t> open_from_;                   // this life's first version
};

}  // namespace moerl::runtime
