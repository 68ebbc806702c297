// RedisExperienceBuffer over Redis Streams: records appended with XADD, read by the trainer's
// consumer group, deduplicated by (task_id, attempt), trimmed once a checkpoint holding the
// read position is committed.
#include "runtime/redis_queue.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "runtime/redis_streams.h"

namespace moerl::runtime {

using namespace detail;  // NOLINT: the shared reply parsers

RedisExperienceBuffer::RedisExperienceBuffer(const RedisUrl& url, const std::string& ns,
                                             std::string consumer, RedisOptions redis)
    : keys_(ns), consumer_(std::move(consumer)), reader_(url, redis), writer_(url, redis) {}

void RedisExperienceBuffer::ensure_group(Deadline deadline) {
  RedisReply r = writer_.command(
      {"XGROUP", "CREATE", keys_.experience, RedisKeys::kTrainerGroup, "0", "MKSTREAM"}, deadline);
  if (r.is_error() && r.str.rfind("BUSYGROUP", 0) != 0) {
    throw_if_error(r, "XGROUP CREATE " + keys_.experience);
  }
}

void RedisExperienceBuffer::put(const ExperienceRecord& record, Deadline deadline) {
  std::string bytes = encode_experience(record);
  writer_.command_ok({"XADD", keys_.experience, "*", "rec", bytes, "key",
                      dedupe_key(record.task_id, record.attempt)},
                     deadline);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.put;
}

std::vector<ExperienceRecord> RedisExperienceBuffer::take(size_t n, Deadline deadline) {
  std::vector<ExperienceRecord> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!ungot_.empty() && out.size() < n) {
      out.push_back(std::move(ungot_.front()));
      ungot_.pop_front();
    }
  }
  while (out.size() < n) {
    std::string count = std::to_string(n - out.size());
    std::string from;
    {
      std::lock_guard<std::mutex> lock(mu_);
      from = cursor_;
    }
    // First our own pending entries after the cursor: ones whose read reply was lost when the
    // connection dropped (the server had already moved the group past them).
    RedisReply r = reader_.command({"XREADGROUP", "GROUP", RedisKeys::kTrainerGroup, consumer_,
                                    "COUNT", count, "STREAMS", keys_.experience, from},
                                   deadline);
    if (is_nogroup(r)) {
      ensure_group(deadline);
      continue;
    }
    throw_if_error(r, "XREADGROUP " + keys_.experience);
    std::vector<StreamEntry> entries = parse_read(r);
    if (entries.empty()) {
      std::vector<std::string> argv = {"XREADGROUP", "GROUP", RedisKeys::kTrainerGroup, consumer_,
                                       "COUNT", count};
      double block = 0;
      if (!deadline.expired()) {
        block = std::clamp(deadline.remaining_seconds(), 0.001, 0.5);
        argv.push_back("BLOCK");
        argv.push_back(ms(block));
      }
      argv.insert(argv.end(), {"STREAMS", keys_.experience, ">"});
      r = reader_.command(argv, deadline, block);
      if (is_nogroup(r)) {
        ensure_group(deadline);
        continue;
      }
      throw_if_error(r, "XREADGROUP " + keys_.experience);
      entries = parse_read(r);
    }
    std::vector<std::string> ack = {"XACK", keys_.experience, RedisKeys::kTrainerGroup};
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const StreamEntry& e : entries) {
        cursor_ = e.id;
        ack.push_back(e.id);
        const std::string* bytes = e.field("rec");
        if (bytes == nullptr) continue;  // deleted entry
        ExperienceRecord rec;
        try {
          rec = decode_experience(*bytes);
        } catch (const Error& err) {
          ++corrupt_dropped_;
          MOERL_LOG(ERROR) << "experience stream entry " << e.id << " dropped: " << err.what();
          continue;
        }
        if (!seen_.insert(dedupe_key(rec.task_id, rec.attempt)).second) {
          ++stats_.duplicates_dropped;
          continue;
        }
        ++stats_.taken;
        out.push_back(std::move(rec));
      }
    }
    // NOTE: the trainer checkpoint (cursor + seen set), not the PEL, is the durable record of
    // what was consumed; the PEL only bridges a lost reply, so entries are acked at once.
    if (ack.size() > 3) reader_.command_ok(ack, deadline);
    if (deadline.expired()) break;
  }
  return out;
}

void RedisExperienceBuffer::unget(std::vector<ExperienceRecord> records) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = records.rbegin(); it != records.rend(); ++it) ungot_.push_front(std::move(*it));
}

BufferSnapshot RedisExperienceBuffer::snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  BufferSnapshot s;
  s.cursor = cursor_;
  s.seen = seen_;
  s.ungot.assign(ungot_.begin(), ungot_.end());
  s.duplicates_dropped = stats_.duplicates_dropped;
  s.taken = stats_.taken;
  return s;
}

void RedisExperienceBuffer::restore(const BufferSnapshot& snapshot, Deadline deadline) {
  std::string cursor = snapshot.cursor.empty() ? "0-0" : snapshot.cursor;
  RedisReply r = writer_.command(
      {"XGROUP", "CREATE", keys_.experience, RedisKeys::kTrainerGroup, cursor, "MKSTREAM"}, deadline);
  if (r.is_error() && r.str.rfind("BUSYGROUP", 0) == 0) {
    r = writer_.command({"XGROUP", "SETID", keys_.experience, RedisKeys::kTrainerGroup, cursor},
                        deadline);
  }
  throw_if_error(r, "rewinding " + keys_.experience + " to " + cursor);
  std::lock_guard<std::mutex> lock(mu_);
  cursor_ = cursor;
  seen_ = snapshot.seen;
  ungot_.assign(snapshot.ungot.begin(), snapshot.ungot.end());
  for (const ExperienceRecord& rec : snapshot.pending) {
    if (seen_.insert(dedupe_key(rec.task_id, rec.attempt)).second) ungot_.push_back(rec);
  }
  stats_.duplicates_dropped = snapshot.duplicates_dropped;
  stats_.taken = snapshot.taken;
}

void RedisExperienceBuffer::checkpoint_committed(const BufferSnapshot& snapshot, Deadline deadline) {
  if (snapshot.cursor.empty() || snapshot.cursor == "0-0") return;
  writer_.command_ok({"XTRIM", keys_.experience, "MINID", snapshot.cursor}, deadline);
}

BufferStats RedisExperienceBuffer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BufferStats s = stats_;
  s.available = static_cast<int64_t>(ungot_.size());
  return s;
}

int64_t RedisExperienceBuffer::corrupt_dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return corrupt_dropped_;
}

}  // namespace moerl::runtime
