#include "runtime/lineage.h"

#include <limits>

#include "base/error.h"

namespace moerl::runtime {

VersionLineage VersionLineage::from_json(const nlohmann::json& saved, uint64_t checkpoint_version) {
  VersionLineage l;
  if (saved.is_null()) {
    l.closed_.emplace_back(0, checkpoint_version);
    return l;
  }
  auto bad = [&] {
    return Error("checkpoint: version lineage " + saved.dump() + " is not a list of [first, last] ranges",
                 "the checkpoint is corrupt or from a different moerl build; resume from an older one",
                 ErrorCode::kIo);
  };
  if (!saved.is_array()) throw bad();
  auto whole = [](const nlohmann::json& v) { return v.is_number_integer() && v.get<int64_t>() >= 0; };
  for (const auto& r : saved) {
    if (!r.is_array() || r.size() != 2 || !whole(r[0]) || !whole(r[1])) throw bad();
    const uint64_t first = r[0].get<uint64_t>(), last = r[1].get<uint64_t>();
    if (last < first || (!l.closed_.empty() && first <= l.closed_.back().second)) throw bad();
    l.closed_.emplace_back(first, last);
  }
  return l;
}

void VersionLineage::begin(uint64_t first_version) {
  // NOTE: equal is fine: a life resumed without a durable registry (in-process) republishes
  // its checkpoint's version, with the checkpoint's weights.
  if (!closed_.empty() && first_version < closed_.back().second) {
    throw Error("trainer: first published version " + std::to_string(first_version) + " is not above the lineage " +
                    describe(),
                "versions are never reused; a bug in moerl", ErrorCode::kInternal);
  }
  open_from_ = first_version;
}

bool VersionLineage::contains(uint64_t version) const {
  if (open_from_ && version >= *open_from_) return true;
  for (const auto& [first, last] : closed_) {
    if (version >= first && version <= last) return true;
  }
  return false;
}

std::optional<uint64_t> VersionLineage::foreign_version(const ExperienceRecord& record) const {
  std::optional<uint64_t> out;
  for (const Sample& s : record.samples) {
    for (const VersionSpan& span : s.version_spans) {
      if (!contains(span.version) && (!out || span.version < *out)) out = span.version;
    }
  }
  return out;
}

nlohmann::json VersionLineage::to_json(uint64_t current_version) const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [first, last] : closed_) out.push_back({first, last});
  if (open_from_ && current_version >= *open_from_) out.push_back({*open_from_, current_version});
  return out;
}

std::string VersionLineage::describe() const {
  std::string s;
  for (const auto& [first, last] : closed_) {
    s += (s.empty() ? "" : ", ") + std::to_string(first) + (first == last ? "" : "-" + std::to_string(last));
  }
  if (open_from_) s += (s.empty() ? "" : ", ") + std::to_string(*open_from_) + "-";
  return s.empty() ? "(none)" : s;
}

}  // namespace moerl::runtime
