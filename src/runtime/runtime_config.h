// The [runtime] section of a job config and the factory that opens the queue, buffer and
// weight registry it names. Same config for every role (trainer, rollout, train --mode async).
//
//   [runtime]
//   mode = "async"                          # or "sync" (default)
//   queue_url = "redis://127.0.0.1:6379/0"   # or "inprocess" (default)
//   queue_password_file = "/etc/moerl/redis/password"   # else MOERL_REDIS_PASSWORD
//   namespace = "job42"
//   lease_seconds = 60
//   max_staleness = 2
//   queue_ahead = 0                         # 0 = automatic (job/queue_ahead.h)
//   stale_policy = "regenerate"
//   [runtime.spot]
//   enabled = true
//
//   RuntimeConfig rc = RuntimeConfig::from_config(doc.root().table("runtime"));
//   RuntimeBackends b = open_backends(rc);   // in-process: share b across threads
//   WorkerLoopConfig w = worker_loop_config(rc, "pod-3");
// from_config throws moerl::Error naming the key on bad values and rejects unknown keys.
// The Redis password comes from, in this order: queue_password_file (a mounted Secret), a
// password inside queue_url (local use), the environment variable MOERL_REDIS_PASSWORD. It is
// never logged or written: use redis_url() to connect, redact_url() to show a URL.
#pragma once

#include <memory>
#include <string>

#include "base/config.h"
#include "runtime/experience_buffer.h"
#include "runtime/redis_client.h"
#include "runtime/spot_watcher.h"
#include "runtime/staleness.h"
#include "runtime/task_queue.h"
#include "runtime/weight_registry.h"
#include "runtime/worker_loop.h"

namespace moerl::runtime {

enum class BackendKind { kInProcess, kRedis };
// sync: generate then train, alternating (the baseline); async: disaggregated roles.
enum class RunMode { kSync, kAsync };

struct RuntimeConfig {
  RunMode mode = RunMode::kSync;   // "mode" in TOML: "sync" | "async"
  std::string queue_url = "inprocess";   // as configured; may hold a password (redact it)
  std::string queue_password_file;        // "" = none; read once by from_config
  // Resolved by from_config (file, URL, or MOERL_REDIS_PASSWORD; "" = no AUTH). Secret: never
  // logged, serialised or written to disk.
  std::string queue_password;
  std::string ns = "moerl";          // key namespace in Redis ("namespace" in TOML)
  double lease_seconds = 60;
  double renew_seconds = 0;          // 0 = lease_seconds / 3
  int tasks_per_lease = 1;
  // Tasks the async trainer keeps ahead of training (queued, leased, or records waiting in the
  // buffer). 0 = automatic (job/queue_ahead.h: deeper for streaming workers, within the
  // staleness budget); an explicit value is used as given.
  int64_t queue_ahead = 0;
  uint32_t max_deliveries = 5;
  uint64_t max_staleness = 1;
  // The trainer publishes a weight version every this many steps (versions still count
  // steps, so a sample can be up to publish_every - 1 versions old when it is generated;
  // must not exceed max_staleness). Larger values amortise publication on small models.
  int publish_every = 1;
  // How a version travels from the trainer to worker processes: "store" (a commit in the
  // object store, any host) or "shared" (memory-mapped files in shared_weights_dir: workers
  // on the trainer's host only, rollout/shared_weights.h). In-process workers always take
  // versions in memory.
  bool shared_weights = false;
  std::string shared_weights_dir = "/dev/shm";
  StalePolicy stale_policy = StalePolicy::kDrop;
  double drain_seconds = 90;
  double drain_margin_seconds = 2;
  double call_timeout_seconds = 30;
  // One trainer per namespace (runtime/trainer_lease.h): a restarted trainer waits up to this
  // long for a dead predecessor's lease; a trainer paused longer is replaced and stops.
  double trainer_lease_seconds = 15;
  bool spot_enabled = false;
  SpotConfig spot;

  static RuntimeConfig from_config(ConfigTable table);
  BackendKind backend() const;
  // The Redis server to connect to, with queue_password (Redis backend only).
  RedisUrl redis_url() const;
  nlohmann::json to_json() const;
};

struct RuntimeBackends {
  std::shared_ptr<TaskQueue> queue;
  std::shared_ptr<ExperienceBuffer> buffer;
  std::shared_ptr<WeightRegistry> weights;
};

// In-process: fresh objects, to be shared by the threads of this process. Redis: fresh
// connections (open one set per process, or per thread that blocks). `trainer_consumer`
// names the trainer in the experience group.
RuntimeBackends open_backends(const RuntimeConfig& config,
                              const std::string& trainer_consumer = "trainer");

WorkerLoopConfig worker_loop_config(const RuntimeConfig& config, const std::string& worker_id);

// The effective config text (`toml`, as ConfigDoc::to_toml writes it) with the password
// removed from runtime.queue_url, fit for RUN_DIR/config.toml: a process reading it back gets
// the password from queue_password_file or MOERL_REDIS_PASSWORD. Throws moerl::Error when the
// password cannot be removed (it still appears in the text).
std::string without_queue_password(const std::string& toml, const RuntimeConfig& config);

}  // namespace moerl::runtime
