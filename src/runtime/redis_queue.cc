// RedisTaskQueue over Redis Streams. Ownership-checked lease
// operations are Lua scripts (atomic on the server); everything else is plain commands.
#include "runtime/redis_queue.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "runtime/redis_streams.h"
#include "runtime/trainer_lease.h"

namespace moerl::runtime {
namespace {

using namespace detail;  // NOLINT: the shared reply parsers

// KEYS[1] tasks stream. ARGV: 1 group, 2 entry id, 3 worker, 4 delivery count, ...
// Returns 0 unless the entry is pending for ARGV[3] with delivery count ARGV[4].
constexpr const char* kOwnedPrologue = R"lua(
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then return 0 end
)lua";

// Resets the idle time without counting a delivery.
constexpr const char* kRenewBody = R"lua(
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'JUSTID')
return 1
)lua";

constexpr const char* kAckBody = R"lua(
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
)lua";

// ARGV[5] hand-back consumer, ARGV[6] idle ms: the entry looks long expired, so the next
// XAUTOCLAIM by any worker takes it.
constexpr const char* kNackBody = R"lua(
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[5], 0, ARGV[2], 'IDLE', ARGV[6], 'JUSTID')
return 1
)lua";

// KEYS[2] dead stream; ARGV[5] task bytes.
constexpr const char* kDeadLetterBody = R"lua(
redis.call('XADD', KEYS[2], '*', 'task', ARGV[5], 'deliveries', ARGV[4], 'worker', ARGV[3], 'id', ARGV[2])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
)lua";

// KEYS[1] tasks, KEYS[2] dead; ARGV[1] group, ARGV[2] hand-back consumer.
constexpr const char* kDepthScript = R"lua(
local xlen = redis.call('XLEN', KEYS[1])
local dead = redis.call('XLEN', KEYS[2])
local pending, handback = 0, 0
local ok, s = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1])
if ok then
  pending = s[1]
  if s[4] then
    for _, c in ipairs(s[4]) do
      if c[1] == ARGV[2] then handback = tonumber(c[2]) end
    end
  end
end
return {xlen, pending, handback, dead}
)lua";

// After kEpochFencePrologue. KEYS[1] tasks, KEYS[2] cursor key, KEYS[3] trainer epoch;
// ARGV[1] task bytes, ARGV[2] next cursor ('0': enqueue without moving it), ARGV[3] the
// writer's epoch. Returns 1 enqueued, 0 already enqueued (the cursor is there).
constexpr const char* kEnqueueBody = R"lua(
if ARGV[2] ~= '0' then
  local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
  if cur >= tonumber(ARGV[2]) then return 0 end
  redis.call('SET', KEYS[2], ARGV[2])
end
redis.call('XADD', KEYS[1], '*', 'task', ARGV[1])
return 1
)lua";

// NOTE: must stay below the Unix time in ms, or Redis clamps the delivery time to now.
constexpr const char* kHandbackIdleMs = "1000000000";

}  // namespace

RedisKeys::RedisKeys(const std::string& ns)
    : tasks(ns + ":tasks"),
      dead(ns + ":tasks:dead"),
      producer_cursor(ns + ":tasks:cursor"),
      experience(ns + ":experience"),
      quarantine(ns + ":experience:quarantine"),
      quarantine_ids(ns + ":experience:quarantine:ids"),
      weights(ns + ":weights"),
      weights_latest(ns + ":weights:latest"),
      trainer_lease(ns + ":trainer:lease"),
      trainer_epoch(ns + ":trainer:epoch") {
  if (ns.empty() || ns.find_first_of(" \t\n{}") != std::string::npos) {
    throw Error("redis namespace '" + ns + "' is empty or has spaces/braces",
                "set runtime.namespace to a job name such as \"job42\"");
  }
}

std::vector<std::string> RedisKeys::run_state() const {
  return {tasks, dead, producer_cursor, experience, quarantine, quarantine_ids};
}

RedisTaskQueue::RedisTaskQueue(const RedisUrl& url, const std::string& ns, QueueOptions options,
                               RedisOptions redis)
    : ns_(ns), keys_(ns), options_(options), reader_(url, redis), control_(url, redis) {
  if (options_.max_deliveries < 1) {
    throw Error("queue: max_deliveries=0, expected >= 1",
                "set runtime.max_deliveries to the deliveries allowed before dead-lettering (e.g. 5)");
  }
}

void RedisTaskQueue::ensure_group(Deadline deadline) {
  RedisReply r = control_.command(
      {"XGROUP", "CREATE", keys_.tasks, RedisKeys::kTaskGroup, "0", "MKSTREAM"}, deadline);
  if (r.is_error() && r.str.rfind("BUSYGROUP", 0) != 0) throw_if_error(r, "XGROUP CREATE " + keys_.tasks);
}

RedisReply RedisTaskQueue::group_command(RedisClient& c, const std::vector<std::string>& argv,
                                         Deadline deadline, double block_seconds) {
  RedisReply r = c.command(argv, deadline, block_seconds);
  if (is_nogroup(r)) {
    ensure_group(deadline);
    r = c.command(argv, deadline, block_seconds);
  }
  throw_if_error(r, argv[0] + " " + keys_.tasks);
  return r;
}

void RedisTaskQueue::enqueue(const TaskUnit& task, Deadline deadline) { fenced_enqueue(task, 0, deadline); }

bool RedisTaskQueue::enqueue_from(const TaskUnit& task, uint64_t next_cursor, Deadline deadline) {
  if (next_cursor == 0) {
    throw Error("queue enqueue_from: next_cursor 0", "a bug in moerl: the next cursor is past a task's own",
                ErrorCode::kInternal);
  }
  return fenced_enqueue(task, next_cursor, deadline);
}

bool RedisTaskQueue::fenced_enqueue(const TaskUnit& task, uint64_t next_cursor, Deadline deadline) {
  static const std::string script = std::string(kEpochFencePrologue) + kEnqueueBody;
  const std::string epoch = std::to_string(epoch_.load());
  RedisReply r = control_.command_ok({"EVAL", script, "3", keys_.tasks, keys_.producer_cursor, keys_.trainer_epoch,
                                      encode_task(task), std::to_string(next_cursor), epoch},
                                     deadline);
  throw_if_fenced(r, ns_, epoch, "task " + task.task_id + " was not enqueued");
  if (r.integer != 1) return false;
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.enqueued;
  return true;
}

uint64_t RedisTaskQueue::producer_cursor(Deadline deadline) {
  RedisReply r = control_.command_ok({"GET", keys_.producer_cursor}, deadline);
  if (r.is_nil()) return 0;
  try {
    return std::stoull(r.str);
  } catch (const std::exception&) {
    throw Error("redis key " + keys_.producer_cursor + " holds '" + r.str + "', not a cursor",
                "the key was written by something else; use a fresh runtime.namespace",
                ErrorCode::kIo);
  }
}

uint32_t RedisTaskQueue::delivery_count(const std::string& id, const std::string& worker,
                                        Deadline deadline) {
  RedisReply r = group_command(control_, {"XPENDING", keys_.tasks, RedisKeys::kTaskGroup, id, id, "1"},
                               deadline);
  if (!r.is_array() || r.elements.empty()) return 0;  // no longer pending (acked meanwhile)
  const RedisReply& p = r.at(0);
  if (p.at(1).str != worker) return 0;                // taken by another worker meanwhile
  return static_cast<uint32_t>(p.at(3).integer);
}

bool RedisTaskQueue::owned_script(const char* body, const Lease& lease, Deadline deadline) {
  std::string script = std::string(kOwnedPrologue) + body;
  RedisReply r = control_.command(
      {"EVAL", script, "1", keys_.tasks, RedisKeys::kTaskGroup, lease.lease_id, lease.worker,
       std::to_string(lease.delivery_count), RedisKeys::kHandback, kHandbackIdleMs},
      deadline);
  if (is_nogroup(r)) return false;  // the stream is gone: nothing is held
  throw_if_error(r, "lease script on " + keys_.tasks);
  return r.integer == 1;
}

void RedisTaskQueue::admit(const std::vector<Entry>& entries, const std::string& worker, bool fresh,
                           double lease_seconds, Deadline deadline, std::vector<Lease>* out) {
  for (const Entry& e : entries) {
    if (e.task_bytes.empty()) {
      // Deleted while pending (e.g. trimmed by an operator): nothing to do but forget it.
      control_.command({"XACK", keys_.tasks, RedisKeys::kTaskGroup, e.id}, deadline);
      continue;
    }
    uint32_t count = fresh ? 1 : delivery_count(e.id, worker, deadline);
    if (count == 0) continue;
    TaskUnit task;
    bool corrupt = false;
    try {
      task = decode_task(e.task_bytes);
    } catch (const Error& err) {
      MOERL_LOG(ERROR) << "task queue " << keys_.tasks << " entry " << e.id
                       << " cannot be decoded, dead-lettering it: " << err.what();
      corrupt = true;
    }
    if (corrupt || count > options_.max_deliveries) {
      std::string script = std::string(kOwnedPrologue) + kDeadLetterBody;
      RedisReply r = control_.command({"EVAL", script, "2", keys_.tasks, keys_.dead,
                                       RedisKeys::kTaskGroup, e.id, worker, std::to_string(count),
                                       e.task_bytes},
                                      deadline);
      throw_if_error(r, "dead-letter script on " + keys_.tasks);
      if (r.integer == 1) {
        MOERL_LOG(WARN) << "task " << (corrupt ? e.id : task.task_id) << " dead-lettered after "
                        << count << " deliveries (limit " << options_.max_deliveries << ")";
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.dead_lettered;
      }
      continue;
    }
    if (!fresh) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.requeued;
    }
    out->push_back(Lease{e.id, worker, count, lease_seconds, std::move(task)});
  }
}

std::vector<Lease> RedisTaskQueue::lease(const std::string& worker, int n, double lease_seconds,
                                         Deadline deadline) {
  if (n < 1 || lease_seconds <= 0 || worker.empty() || worker == RedisKeys::kHandback) {
    throw Error("queue lease: worker='" + worker + "' n=" + std::to_string(n) +
                    " lease_seconds=" + std::to_string(lease_seconds) +
                    ": need a worker name, n >= 1 and lease_seconds > 0",
                "pass the worker id, the tasks wanted and runtime.lease_seconds");
  }
  auto to_entries = [](const std::vector<StreamEntry>& in) {
    std::vector<Entry> out;
    for (const StreamEntry& s : in) {
      const std::string* t = s.field("task");
      out.push_back(Entry{s.id, t ? *t : std::string()});
    }
    return out;
  };
  std::vector<Lease> out;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first = recovered_.insert(worker).second;
  }
  if (first) {
    // A restarted worker with the same name first takes back what it held (id 0 = own PEL).
    RedisReply r = group_command(reader_, {"XREADGROUP", "GROUP", RedisKeys::kTaskGroup, worker,
                                           "COUNT", std::to_string(n), "STREAMS", keys_.tasks, "0"},
                                 deadline);
    admit(to_entries(parse_read(r)), worker, false, lease_seconds, deadline, &out);
  }
  while (true) {
    double block = 0;
    // Take over leases idle past lease_seconds (dead or slow holders) and handed-back tasks.
    std::string cursor = "0-0";
    for (int page = 0; static_cast<int>(out.size()) < n && page < 64; ++page) {
      RedisReply r = group_command(
          reader_, {"XAUTOCLAIM", keys_.tasks, RedisKeys::kTaskGroup, worker, ms(lease_seconds),
                    cursor, "COUNT", std::to_string(n - static_cast<int>(out.size()))},
          deadline);
      admit(to_entries(parse_entries(r.at(1))), worker, false, lease_seconds, deadline, &out);
      cursor = r.at(0).str;
      if (cursor == "0-0") break;
    }
    if (static_cast<int>(out.size()) < n) {
      std::vector<std::string> argv = {"XREADGROUP", "GROUP", RedisKeys::kTaskGroup, worker,
                                       "COUNT", std::to_string(n - static_cast<int>(out.size()))};
      // NOTE: short blocks, so leases that expire meanwhile are claimed on the next pass.
      block = out.empty() ? block_seconds(deadline, 0.25) : 0.0;
      if (block > 0) {
        argv.push_back("BLOCK");
        argv.push_back(ms(block));
      }
      argv.insert(argv.end(), {"STREAMS", keys_.tasks, ">"});
      RedisReply r = group_command(reader_, argv, deadline, block);
      admit(to_entries(parse_read(r)), worker, true, lease_seconds, deadline, &out);
    }
    if (!out.empty() || deadline.expired()) return out;
    if (block == 0) poll_pause(deadline);
  }
}

bool RedisTaskQueue::renew(const Lease& lease, Deadline deadline) {
  return owned_script(kRenewBody, lease, deadline);
}

bool RedisTaskQueue::ack(const Lease& lease, Deadline deadline) {
  bool ok = owned_script(kAckBody, lease, deadline);
  if (ok) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.acked;
  }
  return ok;
}

bool RedisTaskQueue::nack(const Lease& lease, Deadline deadline) {
  bool ok = owned_script(kNackBody, lease, deadline);
  if (ok) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.requeued;
  }
  return ok;
}

QueueDepth RedisTaskQueue::depth(Deadline deadline) {
  RedisReply r = control_.command({"EVAL", kDepthScript, "2", keys_.tasks, keys_.dead,
                                   RedisKeys::kTaskGroup, RedisKeys::kHandback},
                                  deadline);
  throw_if_error(r, "depth script on " + keys_.tasks);
  QueueDepth d;
  int64_t xlen = r.at(0).integer, pending = r.at(1).integer, handback = r.at(2).integer;
  d.leased = pending - handback;
  d.ready = xlen - d.leased;
  d.dead = r.at(3).integer;
  return d;
}

std::vector<TaskUnit> RedisTaskQueue::dead_letters(Deadline deadline) {
  RedisReply r = control_.command_ok({"XRANGE", keys_.dead, "-", "+"}, deadline);
  std::vector<TaskUnit> out;
  for (const StreamEntry& e : parse_entries(r)) {
    const std::string* t = e.field("task");
    if (t == nullptr) continue;
    try {
      out.push_back(decode_task(*t));
    } catch (const Error& err) {
      MOERL_LOG(WARN) << "dead-letter entry " << e.id << " is not a task record: " << err.what();
    }
  }
  return out;
}

QueueStats RedisTaskQueue::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace moerl::runtime
