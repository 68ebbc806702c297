// BufferSnapshot encoding (magic "MRBS", version 2; version 1 is still read): the trainer-side
// buffer state that rides in a trainer checkpoint. Records inside are nested experience
// records, each with its own header and checksum. Version 2 adds the settled watermark and
// each dedupe key's data cursor.
#include "runtime/experience_buffer.h"

#include "base/error.h"
#include "runtime/byte_codec.h"

namespace moerl::runtime {
namespace {

constexpr char kSnapshotMagic[4] = {'M', 'R', 'B', 'S'};
constexpr uint16_t kSnapshotVersion = 2;
// Version 1 keys carry no cursor: they are kept until the run ends (never below a watermark).
constexpr uint64_t kUnknownCursor = UINT64_MAX;

void put_records(ByteWriter& w, const std::vector<ExperienceRecord>& records) {
  w.put<uint32_t>(static_cast<uint32_t>(records.size()));
  for (const ExperienceRecord& r : records) w.put_string(encode_experience(r));
}

std::vector<ExperienceRecord> get_records(ByteReader& r) {
  uint32_t n = r.get<uint32_t>();
  std::vector<ExperienceRecord> out;
  for (uint32_t i = 0; i < n; ++i) out.push_back(decode_experience(r.get_string()));
  return out;
}

}  // namespace

std::string BufferSnapshot::encode() const {
  ByteWriter w;
  w.put_string(cursor);
  w.put<int64_t>(duplicates_dropped);
  w.put<int64_t>(taken);
  w.put<uint64_t>(data_cursor);
  w.put<uint64_t>(settled_below);
  w.put<uint32_t>(static_cast<uint32_t>(seen.size()));
  for (const auto& [key, task_cursor] : seen) {
    w.put_string(key);
    w.put<uint64_t>(task_cursor);
  }
  put_records(w, pending);
  put_records(w, ungot);
  w.put_string(extra);
  return frame_record(kSnapshotMagic, kSnapshotVersion, w.bytes());
}

BufferSnapshot BufferSnapshot::decode(std::string_view bytes) {
  constexpr const char* kWhat = "experience buffer snapshot";
  uint16_t version = 0;
  ByteReader r(unframe_record(bytes, kSnapshotMagic, 1, kSnapshotVersion, &version, kWhat), kWhat);
  BufferSnapshot s;
  s.cursor = r.get_string();
  s.duplicates_dropped = r.get<int64_t>();
  s.taken = r.get<int64_t>();
  s.data_cursor = r.get<uint64_t>();
  if (version >= 2) s.settled_below = r.get<uint64_t>();
  uint32_t num_seen = r.get<uint32_t>();
  for (uint32_t i = 0; i < num_seen; ++i) {
    std::string key = r.get_string();
    s.seen[key] = version >= 2 ? r.get<uint64_t>() : kUnknownCursor;
  }
  s.pending = get_records(r);
  s.ungot = get_records(r);
  s.extra = r.get_string();
  if (r.remaining() != 0) {
    throw Error(std::string(kWhat) + ": " + std::to_string(r.remaining()) +
                    " unexpected bytes after the last field",
                "the checkpoint was written by a different moerl build", ErrorCode::kIo);
  }
  return s;
}

}  // namespace moerl::runtime
