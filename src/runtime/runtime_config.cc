// [runtime] config parsing and the backend factory.
#include "runtime/runtime_config.h"

#include <fstream>
#include <sstream>

#include "base/env.h"
#include "base/error.h"
#include "runtime/in_process_queue.h"
#include "runtime/redis_queue.h"

namespace moerl::runtime {

namespace {

// Far above any useful depth (tasks ahead are cheap queue entries, but each is generated).
constexpr int64_t kMaxQueueAhead = int64_t{1} << 20;

// The password, from the first of: queue_password_file, the URL, MOERL_REDIS_PASSWORD.
std::string resolve_password(const RuntimeConfig& c, const std::string& table) {
  const std::string in_url = parse_redis_url(c.queue_url).password;
  if (!c.queue_password_file.empty()) {
    if (!in_url.empty()) {
      throw Error(table + ".queue_password_file = \"" + c.queue_password_file + "\" and a password inside " + table +
                      ".queue_url = \"" + redact_url(c.queue_url) + "\": two passwords",
                  "keep one: drop the password from the URL (redis://host:port/db) when the file holds it");
    }
    std::ifstream in(c.queue_password_file);
    std::stringstream ss;
    if (in) ss << in.rdbuf();
    std::string pw = ss.str();
    while (!pw.empty() && (pw.back() == '\n' || pw.back() == '\r')) pw.pop_back();
    if (!in || pw.empty()) {
      throw Error(table + ".queue_password_file = \"" + c.queue_password_file + "\" " +
                      (in ? "is empty" : "cannot be read"),
                  "mount the Redis password Secret there (one line, the password), or unset the key and pass the "
                  "password in MOERL_REDIS_PASSWORD");
    }
    return pw;
  }
  if (!in_url.empty()) return in_url;
  return env::get_or("MOERL_REDIS_PASSWORD", "");
}

}  // namespace

RuntimeConfig RuntimeConfig::from_config(ConfigTable t) {
  RuntimeConfig c;
  c.mode = t.choice("mode", "sync", {"sync", "async"}) == "sync" ? RunMode::kSync : RunMode::kAsync;
  c.queue_url = t.string("queue_url", c.queue_url);
  c.queue_password_file = t.string("queue_password_file", c.queue_password_file);
  c.ns = t.string("namespace", c.ns);
  c.lease_seconds = t.number("lease_seconds", c.lease_seconds, {.min = 0.05, .max = 86400});
  c.renew_seconds = t.number("renew_seconds", c.renew_seconds, {.min = 0, .max = 86400});
  c.tasks_per_lease = static_cast<int>(t.integer("tasks_per_lease", c.tasks_per_lease, {.min = 1, .max = 4096}));
  c.queue_ahead = t.integer("queue_ahead", c.queue_ahead,
                            {.min = 0,
                             .max = static_cast<double>(kMaxQueueAhead),
                             .hint = "0 = automatic (max(prompts_per_step, tasks_per_lease x num_workers); for "
                                     "streaming workers at least prompts_per_step x (max_staleness - 1)), or the "
                                     "number of tasks to keep ahead, e.g. 80"});
  c.max_deliveries = static_cast<uint32_t>(t.integer("max_deliveries", c.max_deliveries, {.min = 1, .max = 1000}));
  c.max_staleness = static_cast<uint64_t>(t.integer("max_staleness", static_cast<int64_t>(c.max_staleness), {.min = 0, .max = 1e6}));
  c.stale_policy = parse_stale_policy(t.choice("stale_policy", "drop", {"drop", "regenerate"}));
  c.publish_every = static_cast<int>(t.integer("publish_every", c.publish_every, {.min = 1, .max = 1000}));
  c.shared_weights = t.choice("weight_transport", "store", {"store", "shared"}) == "shared";
  c.shared_weights_dir = t.string("shared_weights_dir", c.shared_weights_dir);
  c.drain_seconds = t.number("drain_seconds", c.drain_seconds, {.min = 0.1, .max = 3600});
  c.drain_margin_seconds = t.number("drain_margin_seconds", c.drain_margin_seconds, {.min = 0, .max = 3600});
  c.call_timeout_seconds = t.number("call_timeout_seconds", c.call_timeout_seconds, {.min = 0.1, .max = 3600});
  c.trainer_lease_seconds = t.number("trainer_lease_seconds", c.trainer_lease_seconds, {.min = 0.5, .max = 3600});
  ConfigTable spot = t.table("spot");
  c.spot_enabled = spot.boolean("enabled", c.spot_enabled);
  c.spot.metadata_url = spot.string("metadata_url", c.spot.metadata_url);
  c.spot.poll_seconds = spot.number("poll_seconds", c.spot.poll_seconds, {.min = 0.01, .max = 3600});
  c.spot.token_ttl_seconds = static_cast<int>(spot.integer("token_ttl_seconds", c.spot.token_ttl_seconds, {.min = 1, .max = 21600}));
  c.spot.request_timeout_seconds = spot.number("request_timeout_seconds", c.spot.request_timeout_seconds, {.min = 0.01, .max = 60});
  spot.done();
  t.done();
  if (c.publish_every > 1 && static_cast<uint64_t>(c.publish_every) > c.max_staleness) {
    throw Error(t.path() + ".publish_every=" + std::to_string(c.publish_every) + " exceeds max_staleness=" +
                    std::to_string(c.max_staleness) + ": samples would be generated already too stale",
                "raise max_staleness to at least publish_every, or publish more often");
  }
  if (c.renew_seconds >= c.lease_seconds) {
    throw Error(t.path() + ".renew_seconds=" + std::to_string(c.renew_seconds) +
                    " must be below lease_seconds=" + std::to_string(c.lease_seconds),
                "renew a few times per lease, e.g. renew_seconds = lease_seconds / 3 (or 0 for that default)");
  }
  if (c.drain_margin_seconds >= c.drain_seconds) {
    throw Error(t.path() + ".drain_margin_seconds=" + std::to_string(c.drain_margin_seconds) +
                    " must be below drain_seconds=" + std::to_string(c.drain_seconds),
                "keep a small margin (default 2 s) of the drain deadline for hand-back and flush");
  }
  c.backend();  // validates the URL
  c.spot.validate();
  if (c.backend() == BackendKind::kRedis) {
    RedisKeys keys(c.ns);  // validates the namespace
    c.queue_password = resolve_password(c, t.path());
  } else if (!c.queue_password_file.empty()) {
    throw Error(t.path() + ".queue_password_file is set but queue_url = \"" + c.queue_url + "\" is not Redis",
                "set queue_url = \"redis://host:6379/0\", or drop queue_password_file");
  }
  return c;
}

BackendKind RuntimeConfig::backend() const {
  if (queue_url == "inprocess") return BackendKind::kInProcess;
  parse_redis_url(queue_url);  // throws a named error for anything else
  return BackendKind::kRedis;
}

RedisUrl RuntimeConfig::redis_url() const {
  RedisUrl u = parse_redis_url(queue_url);
  u.password = queue_password;
  return u;
}

nlohmann::json RuntimeConfig::to_json() const {
  return {{"mode", mode == RunMode::kSync ? "sync" : "async"},
          {"queue_url", backend() == BackendKind::kRedis ? redis_url().to_string() : queue_url},
          {"namespace", ns},
          {"lease_seconds", lease_seconds},
          {"renew_seconds", renew_seconds},
          {"tasks_per_lease", tasks_per_lease},
          {"queue_ahead", queue_ahead},
          {"max_deliveries", max_deliveries},
          {"max_staleness", max_staleness},
          {"stale_policy", stale_policy_name(stale_policy)},
          {"publish_every", publish_every},
          {"weight_transport", shared_weights ? "shared" : "store"},
          {"drain_seconds", drain_seconds},
          {"trainer_lease_seconds", trainer_lease_seconds},
          {"spot_enabled", spot_enabled},
          {"spot_metadata_url", spot.metadata_url}};
}

RuntimeBackends open_backends(const RuntimeConfig& config, const std::string& trainer_consumer) {
  RuntimeBackends b;
  QueueOptions q{.max_deliveries = config.max_deliveries};
  if (config.backend() == BackendKind::kInProcess) {
    b.queue = std::make_shared<InProcessTaskQueue>(q);
    b.buffer = std::make_shared<InProcessExperienceBuffer>();
    b.weights = std::make_shared<InProcessWeightRegistry>();
    return b;
  }
  RedisUrl url = config.redis_url();
  b.queue = std::make_shared<RedisTaskQueue>(url, config.ns, q);
  b.buffer = std::make_shared<RedisExperienceBuffer>(url, config.ns, trainer_consumer);
  b.weights = std::make_shared<RedisWeightRegistry>(url, config.ns);
  return b;
}

WorkerLoopConfig worker_loop_config(const RuntimeConfig& config, const std::string& worker_id) {
  WorkerLoopConfig w;
  w.worker_id = worker_id;
  w.tasks_per_lease = config.tasks_per_lease;
  w.lease_seconds = config.lease_seconds;
  w.renew_seconds = config.renew_seconds;
  w.call_timeout_seconds = config.call_timeout_seconds;
  w.drain_margin_seconds = config.drain_margin_seconds;
  w.validate();
  return w;
}

std::string without_queue_password(const std::string& toml, const RuntimeConfig& config) {
  if (config.backend() != BackendKind::kRedis || parse_redis_url(config.queue_url).password.empty()) return toml;
  const std::string url = config.queue_url, stripped = strip_url_password(url);
  std::string out = toml;
  for (size_t at = out.find(url); at != std::string::npos; at = out.find(url, at + stripped.size())) {
    out.replace(at, url.size(), stripped);
  }
  if (out.find(config.queue_password) != std::string::npos) {
    throw Error("runtime.queue_url = \"" + redact_url(url) +
                    "\": cannot write the config to the run dir without its password (the URL is quoted differently)",
                "pass the password in runtime.queue_password_file or MOERL_REDIS_PASSWORD, not in the URL");
  }
  return out;
}

}  // namespace moerl::runtime
