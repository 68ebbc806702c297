// [runtime] config parsing and the backend factory.
#include "runtime/runtime_config.h"

#include "base/error.h"
#include "runtime/in_process_queue.h"
#include "runtime/redis_queue.h"

namespace moerl::runtime {

RuntimeConfig RuntimeConfig::from_config(ConfigTable t) {
  RuntimeConfig c;
  c.mode = t.choice("mode", "sync", {"sync", "async"}) == "sync" ? RunMode::kSync : RunMode::kAsync;
  c.queue_url = t.string("queue_url", c.queue_url);
  c.ns = t.string("namespace", c.ns);
  c.lease_seconds = t.number("lease_seconds", c.lease_seconds, {.min = 0.05, .max = 86400});
  c.renew_seconds = t.number("renew_seconds", c.renew_seconds, {.min = 0, .max = 86400});
  c.tasks_per_lease = static_cast<int>(t.integer("tasks_per_lease", c.tasks_per_lease, {.min = 1, .max = 4096}));
  c.max_deliveries = static_cast<uint32_t>(t.integer("max_deliveries", c.max_deliveries, {.min = 1, .max = 1000}));
  c.max_staleness = static_cast<uint64_t>(t.integer("max_staleness", static_cast<int64_t>(c.max_staleness), {.min = 0, .max = 1e6}));
  c.stale_policy = parse_stale_policy(t.choice("stale_policy", "drop", {"drop", "regenerate"}));
  c.publish_every = static_cast<int>(t.integer("publish_every", c.publish_every, {.min = 1, .max = 1000}));
  c.drain_seconds = t.number("drain_seconds", c.drain_seconds, {.min = 0.1, .max = 3600});
  c.drain_margin_seconds = t.number("drain_margin_seconds", c.drain_margin_seconds, {.min = 0, .max = 3600});
  c.call_timeout_seconds = t.number("call_timeout_seconds", c.call_timeout_seconds, {.min = 0.1, .max = 3600});
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
  if (c.backend() == BackendKind::kRedis) RedisKeys keys(c.ns);  // validates the namespace
  return c;
}

BackendKind RuntimeConfig::backend() const {
  if (queue_url == "inprocess") return BackendKind::kInProcess;
  parse_redis_url(queue_url);  // throws a named error for anything else
  return BackendKind::kRedis;
}

nlohmann::json RuntimeConfig::to_json() const {
  return {{"mode", mode == RunMode::kSync ? "sync" : "async"},
          {"queue_url", backend() == BackendKind::kRedis ? parse_redis_url(queue_url).to_string() : queue_url},
          {"namespace", ns},
          {"lease_seconds", lease_seconds},
          {"renew_seconds", renew_seconds},
          {"tasks_per_lease", tasks_per_lease},
          {"max_deliveries", max_deliveries},
          {"max_staleness", max_staleness},
          {"stale_policy", stale_policy_name(stale_policy)},
          {"publish_every", publish_every},
          {"drain_seconds", drain_seconds},
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
  RedisUrl url = parse_redis_url(config.queue_url);
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

std::string redact_url(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t at = url.find('@', scheme == std::string::npos ? 0 : scheme + 3);
  if (scheme == std::string::npos || at == std::string::npos) return url;
  const size_t colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return url;  // user only, no password
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

}  // namespace moerl::runtime
