// RedisExperienceBuffer over Redis Streams: records appended with XADD, read by the trainer's
// consumer group, deduplicated by (task_id, attempt), trimmed once a checkpoint holding the
// read position is committed; records refused at take() move to NS:experience:quarantine, once
// per experience entry however often it is read.
#include "runtime/redis_queue.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "runtime/redis_streams.h"

namespace moerl::runtime {
namespace {

// KEYS[1] quarantine stream, KEYS[2] its index of experience entry ids; ARGV[1] the entry id,
// ARGV[2] key, ARGV[3] reason, ARGV[4] the record's bytes. 1 added; 0 the entry is there
// already (a trainer rewound to an older checkpoint read it again, or a retried call).
constexpr const char* kQuarantineScript = R"lua(
if redis.call('ZADD', KEYS[2], 'NX', string.match(ARGV[1], '^%d+'), ARGV[1]) == 0 then return 0 end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', '10000', '*', 'id', ARGV[1], 'key', ARGV[2], 'reason', ARGV[3],
           'rec', ARGV[4])
return 1
)lua";

}  // namespace

using namespace detail;  // NOLINT: the shared reply parsers

RedisExperienceBuffer::RedisExperienceBuffer(const RedisUrl& url, const std::string& ns,
                                             std::string consumer, RedisOptions redis)
    : keys_(ns), consumer_(std::move(consumer)), reader_(url, redis), writer_(url, redis) {}

std::string RedisExperienceBuffer::group() const {
  std::lock_guard<std::mutex> lock(mu_);
  return group_;
}

bool RedisExperienceBuffer::create_group(const std::string& group, const std::string& id, Deadline deadline) {
  RedisReply r = writer_.command({"XGROUP", "CREATE", keys_.experience, group, id, "MKSTREAM"}, deadline);
  if (r.is_error() && r.str.rfind("BUSYGROUP", 0) == 0) return false;
  throw_if_error(r, "XGROUP CREATE " + keys_.experience + " " + group + " " + id);
  return true;
}

void RedisExperienceBuffer::ensure_group(Deadline deadline) {
  std::string from;
  {
    std::lock_guard<std::mutex> lock(mu_);
    from = cursor_;
  }
  create_group(group(), from, deadline);
}

void RedisExperienceBuffer::remove_other_groups(Deadline deadline) {
  RedisReply r = writer_.command_ok({"XINFO", "GROUPS", keys_.experience}, deadline);
  const std::string mine = group();
  for (const RedisReply& g : r.elements) {
    for (size_t i = 0; i + 1 < g.elements.size(); i += 2) {
      if (g.elements[i].str != "name") continue;
      const std::string& name = g.elements[i + 1].str;
      if (name != mine && name.rfind(RedisKeys::kTrainerGroup, 0) == 0) {
        writer_.command_ok({"XGROUP", "DESTROY", keys_.experience, name}, deadline);
      }
    }
  }
}

void RedisExperienceBuffer::set_epoch(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  group_ = std::string(RedisKeys::kTrainerGroup) + "-" + std::to_string(epoch);
}

void RedisExperienceBuffer::put(const ExperienceRecord& record, Deadline deadline) {
  std::string bytes = encode_experience(record);
  writer_.command_ok({"XADD", keys_.experience, "*", "rec", bytes, "key",
                      dedupe_key(record.task_id, record.attempt)},
                     deadline);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.put;
}

void RedisExperienceBuffer::take_into(size_t n, Deadline deadline, std::vector<ExperienceRecord>& out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!ungot_.empty() && out.size() < n) {
      out.push_back(std::move(ungot_.front()));
      ungot_.pop_front();
    }
  }
  while (out.size() < n) {
    double block = 0;
    std::string count = std::to_string(n - out.size());
    std::string from;
    {
      std::lock_guard<std::mutex> lock(mu_);
      from = cursor_;
    }
    const std::string group = this->group();
    // First our own pending entries after the cursor: ones whose read reply was lost when the
    // connection dropped (the server had already moved the group past them).
    RedisReply r = reader_.command({"XREADGROUP", "GROUP", group, consumer_,
                                    "COUNT", count, "STREAMS", keys_.experience, from},
                                   deadline);
    if (is_nogroup(r)) {
      ensure_group(deadline);
      continue;
    }
    throw_if_error(r, "XREADGROUP " + keys_.experience);
    std::vector<StreamEntry> entries = parse_read(r);
    if (entries.empty()) {
      std::vector<std::string> argv = {"XREADGROUP", "GROUP", group, consumer_, "COUNT", count};
      block = block_seconds(deadline, 0.5);
      if (block > 0) {
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
    std::vector<std::string> ack = {"XACK", keys_.experience, group};
    std::vector<std::pair<QuarantinedRecord, const std::string*>> refused;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const StreamEntry& e : entries) {
        cursor_ = e.id;
        ack.push_back(e.id);
        const std::string* bytes = e.field("rec");
        if (bytes == nullptr) continue;  // deleted entry
        if (auto again = refused_.find(e.id); again != refused_.end()) {
          refused.emplace_back(again->second, bytes);  // its dead letter may have been lost with the AOF
          continue;
        }
        QuarantinedRecord q;
        std::optional<ExperienceRecord> rec = admit(e.id, *bytes, e.field("key"), &q);
        if (!rec) {
          // NOTE: judged in order, so a later copy of a refused key in this same read is
          // already a duplicate when the handler reserved the key.
          if (on_quarantine_) {
            if (std::optional<uint64_t> at = on_quarantine_(q)) seen_.reserve(dedupe_key(q.task_id, q.attempt), *at);
          }
          refused_.emplace(e.id, q);
          refused.emplace_back(std::move(q), bytes);
          continue;
        }
        if (!seen_.admit(dedupe_key(rec->task_id, rec->attempt), rec->cursor)) {
          ++stats_.duplicates_dropped;
          continue;
        }
        ++stats_.taken;
        out.push_back(std::move(*rec));
      }
    }
    for (const auto& [q, bytes] : refused) move_to_quarantine(q, *bytes, deadline);
    // NOTE: the trainer checkpoint (cursor + seen set), not the PEL, is the durable record of
    // what was consumed; the PEL only bridges a lost reply, so entries are acked at once.
    if (ack.size() > 3) reader_.command_ok(ack, deadline);
    if (deadline.expired()) break;
    if (entries.empty() && block == 0) poll_pause(deadline);
  }
}

std::vector<ExperienceRecord> RedisExperienceBuffer::take(size_t n, Deadline deadline) {
  std::vector<ExperienceRecord> out;
  try {
    take_into(n, deadline, out);
  } catch (...) {
    // Read (the group and our cursor are past them) but not handed out: a failed XACK or a
    // later read must not lose them. The next take() returns them first.
    unget(std::move(out));
    throw;
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
  s.seen = seen_.keys();
  s.settled_below = seen_.settled_below();
  s.ungot.assign(ungot_.begin(), ungot_.end());
  s.duplicates_dropped = stats_.duplicates_dropped;
  s.taken = stats_.taken;
  return s;
}

void RedisExperienceBuffer::restore(const BufferSnapshot& snapshot, Deadline deadline) {
  const std::string cursor = snapshot.cursor.empty() ? "0-0" : snapshot.cursor;
  const std::string group = this->group();
  if (!create_group(group, cursor, deadline)) {
    throw_if_error(writer_.command({"XGROUP", "SETID", keys_.experience, group, cursor}, deadline),
                   "rewinding " + keys_.experience + " to " + cursor);
  }
  remove_other_groups(deadline);
  std::lock_guard<std::mutex> lock(mu_);
  cursor_ = cursor;
  seen_.restore(snapshot.seen, snapshot.settled_below);
  ungot_.assign(snapshot.ungot.begin(), snapshot.ungot.end());
  for (const ExperienceRecord& rec : snapshot.pending) {
    if (seen_.admit(dedupe_key(rec.task_id, rec.attempt), rec.cursor)) ungot_.push_back(rec);
  }
  stats_.duplicates_dropped = snapshot.duplicates_dropped;
  stats_.taken = snapshot.taken;
  // NOTE: the caller's accounting rewinds with the snapshot, so an entry refused after it is
  // judged and counted again (its dead letter is not written twice).
  refused_.clear();
}

void RedisExperienceBuffer::checkpoint_committed(const BufferSnapshot& snapshot, Deadline deadline) {
  if (snapshot.cursor.empty() || snapshot.cursor == "0-0") return;
  writer_.command_ok({"XTRIM", keys_.experience, "MINID", snapshot.cursor}, deadline);
  // Entries below the cursor are gone: no trainer reads them again, so their refusals need
  // no remembering (the index keeps those of the cursor's own millisecond a while longer).
  writer_.command_ok({"ZREMRANGEBYSCORE", keys_.quarantine_ids, "-inf",
                      "(" + snapshot.cursor.substr(0, snapshot.cursor.find('-'))},
                     deadline);
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(refused_, [&](const auto& r) { return stream_id_less(r.first, snapshot.cursor); });
}

void RedisExperienceBuffer::settle_below(uint64_t cursor) {
  std::lock_guard<std::mutex> lock(mu_);
  seen_.settle_below(cursor);
}

BufferStats RedisExperienceBuffer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BufferStats s = stats_;
  s.available = static_cast<int64_t>(ungot_.size());
  return s;
}

void RedisExperienceBuffer::set_quarantine(RecordCheck check, QuarantineHandler on_quarantine) {
  std::lock_guard<std::mutex> lock(mu_);
  check_ = std::move(check);
  on_quarantine_ = std::move(on_quarantine);
}

std::optional<ExperienceRecord> RedisExperienceBuffer::admit(const std::string& entry_id, const std::string& bytes,
                                                             const std::string* key, QuarantinedRecord* refused) {
  refused->entry_id = entry_id;
  try {
    ExperienceRecord rec = decode_experience(bytes);
    std::string why = check_ ? check_(rec) : "";
    if (why.empty()) return rec;
    refused->task_id = rec.task_id;
    refused->attempt = rec.attempt;
    refused->decoded = true;
    refused->cursor = rec.cursor;
    refused->reason = std::move(why);
  } catch (const Error& err) {
    refused->reason = err.message();
    // The entry's key field ("task_id#attempt", written beside the bytes) says which task
    // the undecodable record claims; unverified.
    const size_t hash = key ? key->rfind('#') : std::string::npos;
    if (hash != std::string::npos && hash > 0) {
      const std::string digits = key->substr(hash + 1);
      if (!digits.empty() && digits.size() < 10 && digits.find_first_not_of("0123456789") == std::string::npos) {
        refused->task_id = key->substr(0, hash);
        refused->attempt = static_cast<uint32_t>(std::stoul(digits));
      }
    }
  }
  refused->key_taken = !refused->task_id.empty() &&
                       seen_.taken(dedupe_key(refused->task_id, refused->attempt),
                                   refused->decoded ? refused->cursor : UINT64_MAX);
  ++stats_.quarantined;
  MOERL_LOG(ERROR) << "experience stream " << keys_.experience << " entry " << entry_id << " (task "
                   << (refused->task_id.empty() ? std::string("unknown") : dedupe_key(refused->task_id, refused->attempt))
                   << ") quarantined to " << keys_.quarantine << ": " << refused->reason;
  return std::nullopt;
}

void RedisExperienceBuffer::move_to_quarantine(const QuarantinedRecord& q, const std::string& bytes,
                                               Deadline deadline) {
  const std::string key = q.task_id.empty() ? "" : dedupe_key(q.task_id, q.attempt);
  // NOTE: the entry stays in NS:experience (acked; XTRIM frees it with the rest at the next
  // checkpoint). A trainer rewound to an older checkpoint reads it again and decides the same
  // way: reserves its key and re-creates its task, which a deleted entry would not (a late
  // copy of the refused attempt would then train beside the re-created one). Its dead letter
  // is written once: the script skips an entry id already quarantined.
  RedisReply r = writer_.command_ok(
      {"EVAL", kQuarantineScript, "2", keys_.quarantine, keys_.quarantine_ids, q.entry_id, key, q.reason, bytes},
      deadline);
  if (r.integer == 0) {
    MOERL_LOG(INFO) << "experience stream " << keys_.experience << " entry " << q.entry_id << " is in "
                    << keys_.quarantine << " already (read again after a rewind)";
  }
}

}  // namespace moerl::runtime
