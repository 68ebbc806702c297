// The rollout instance's messages (framed like the runtime's records: magic "MRIM", version,
// CRC), its agreement, and the gather of each rank's records to the leader.
#include "rollout/instance.h"

#include <algorithm>

#include "base/error.h"
#include "runtime/byte_codec.h"

namespace moerl::rollout {

namespace {

constexpr char kMessageMagic[4] = {'M', 'R', 'I', 'M'};
constexpr uint16_t kMessageVersion = 1;
constexpr char kRecordsMagic[4] = {'M', 'R', 'I', 'R'};
constexpr uint16_t kRecordsVersion = 1;

std::string encode_records(const std::vector<runtime::ExperienceRecord>& recs) {
  runtime::ByteWriter w;
  w.put<uint32_t>(static_cast<uint32_t>(recs.size()));
  for (const auto& r : recs) w.put_string(runtime::encode_experience(r));
  return runtime::frame_record(kRecordsMagic, kRecordsVersion, w.bytes());
}

std::vector<runtime::ExperienceRecord> decode_records(std::string_view bytes) {
  runtime::ByteReader r(runtime::unframe_record(bytes, kRecordsMagic, kRecordsVersion, "instance records"),
                        "instance records");
  std::vector<runtime::ExperienceRecord> out(r.get<uint32_t>());
  for (auto& rec : out) rec = runtime::decode_experience(r.get_string());
  return out;
}

}  // namespace

std::string encode_instance_message(const InstanceMessage& m) {
  runtime::ByteWriter w;
  w.put<uint8_t>(static_cast<uint8_t>(m.command));
  w.put<uint64_t>(m.batch);
  w.put<uint32_t>(static_cast<uint32_t>(m.units.size()));
  for (const auto& u : m.units) w.put_string(runtime::encode_task(u));
  return runtime::frame_record(kMessageMagic, kMessageVersion, w.bytes());
}

InstanceMessage decode_instance_message(std::string_view bytes) {
  runtime::ByteReader r(runtime::unframe_record(bytes, kMessageMagic, kMessageVersion, "instance message"),
                        "instance message");
  InstanceMessage m;
  const uint8_t c = r.get<uint8_t>();
  if (c > static_cast<uint8_t>(InstanceCommand::kStop)) {
    throw Error("instance message: unknown command " + std::to_string(c),
                "every rank of an instance must run the same moerl build", ErrorCode::kIo);
  }
  m.command = static_cast<InstanceCommand>(c);
  m.batch = r.get<uint64_t>();
  m.units.resize(r.get<uint32_t>());
  for (auto& u : m.units) u = runtime::decode_task(r.get_string());
  return m;
}

InstanceLink::InstanceLink(std::shared_ptr<ep::ControlGroup> group) : group_(std::move(group)) {}

void InstanceLink::send(const InstanceMessage& m) { group_->broadcast(encode_instance_message(m)); }

InstanceMessage InstanceLink::receive() { return decode_instance_message(group_->broadcast(std::string())); }

InstanceAgreement InstanceLink::agree(bool draining, uint64_t staged_version) {
  // One MAX all-reduce: draining anywhere, -min and max of the staged versions.
  const double v = static_cast<double>(staged_version);
  std::vector<double> m = group_->max({draining ? 1.0 : 0.0, -v, v});
  return {.draining = m[0] > 0, .staged_min = static_cast<uint64_t>(-m[1]), .staged_max = static_cast<uint64_t>(m[2])};
}

std::vector<runtime::TaskUnit> InstanceLink::share(const std::vector<runtime::TaskUnit>& units) const {
  std::vector<runtime::TaskUnit> mine;
  for (size_t i = static_cast<size_t>(rank()); i < units.size(); i += static_cast<size_t>(size())) {
    mine.push_back(units[i]);
  }
  return mine;
}

std::vector<runtime::ExperienceRecord> InstanceLink::collect(const std::vector<runtime::ExperienceRecord>& mine,
                                                             size_t num_units) {
  std::vector<std::string> parts = group_->gather(encode_records(mine));
  if (!leader()) return {};
  std::vector<runtime::ExperienceRecord> out(num_units);
  const size_t R = static_cast<size_t>(size());
  for (size_t r = 0; r < R; ++r) {
    std::vector<runtime::ExperienceRecord> got = decode_records(parts[r]);
    const size_t expect = num_units > r ? (num_units - r + R - 1) / R : 0;
    if (got.size() != expect) {
      throw Error("rollout instance: rank " + std::to_string(r) + " returned " + std::to_string(got.size()) +
                      " records for its " + std::to_string(expect) + " task(s)",
                  "every rank must generate exactly its share of the batch", ErrorCode::kInternal);
    }
    for (size_t k = 0; k < got.size(); ++k) out[r + k * R] = std::move(got[k]);
  }
  return out;
}

LockstepGeneration::LockstepGeneration(ep::ControlGroup& group, std::function<bool()> local_abort)
    : group_(group), local_abort_(std::move(local_abort)) {}

bool LockstepGeneration::all_done(bool local_done) {
  const bool abort = local_abort_ && local_abort_();
  std::vector<double> m = group_.max({local_done ? 0.0 : 1.0, abort ? 1.0 : 0.0});
  abort_ = m[1] > 0;
  return m[0] == 0;
}

}  // namespace moerl::rollout
