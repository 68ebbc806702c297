// TrainerLease: at most one trainer works on a runtime namespace at a time. A trainer takes
// the lease before it reads experience or publishes weights, renews it from a background
// thread, and checks it before each batch, publication and checkpoint; each acquisition gets
// the next epoch (1, 2, ...), which names the trainer's own experience consumer group.
//
//   auto lease = open_trainer_lease(cfg, "trainer-pod-0-3fa91c");   // nullptr in-process
//   uint64_t epoch = lease->acquire(Deadline::after_seconds(cfg.trainer_lease_seconds + 5));
//   ... lease->check(d);   // throws once another trainer holds the namespace
// A trainer that died (SIGKILL, lost node) keeps the lease until it expires
// (trainer_lease_seconds), so its successor waits at most that long. A second trainer started
// on a live one's namespace waits that long too, then stops with an error naming the holder.
// A holder that was frozen past the expiry (SIGSTOP, a stalled node) finds the lease taken
// when it wakes and stops: it never publishes over its successor.
// Redis keys: NS:trainer:lease ("<epoch> <holder>", with a TTL), NS:trainer:epoch (counter).
// Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/deadline.h"
#include "runtime/redis_client.h"

namespace moerl::runtime {

struct RuntimeConfig;

class TrainerLease {
 public:
  virtual ~TrainerLease() = default;
  // Takes the namespace (waiting until the deadline for a previous holder's lease to run
  // out); returns this acquisition's epoch. Throws Error naming the holder when it is still
  // held at the deadline.
  virtual uint64_t acquire(Deadline deadline) = 0;
  // Throws Error when this trainer no longer holds the lease (another trainer took it).
  virtual void check(Deadline deadline) = 0;
  virtual uint64_t epoch() const = 0;
};

class RedisTrainerLease : public TrainerLease {
 public:
  RedisTrainerLease(const RedisUrl& url, const std::string& ns, std::string holder, double ttl_seconds,
                    RedisOptions redis = {});
  ~RedisTrainerLease() override;  // stops renewing and releases the lease if still ours
  uint64_t acquire(Deadline deadline) override;
  void check(Deadline deadline) override;
  uint64_t epoch() const override { return epoch_; }

 private:
  // Extends our lease (or re-takes it when it expired while nobody else claimed the namespace,
  // e.g. across a Redis restart); false when another trainer holds it.
  bool renew(RedisClient& client, Deadline deadline);
  void renew_loop();
  std::string lost_message(const std::string& holder) const;

  const std::string ns_, lease_key_, epoch_key_, holder_;
  const double ttl_seconds_;
  RedisClient client_;   // acquire / check / release
  RedisClient renewer_;  // the renewal thread's connection
  std::atomic<uint64_t> epoch_{0};
  std::string value_;    // "<epoch> <holder>" once acquired
  std::atomic<bool> lost_{false};
  std::atomic<double> renewed_at_{0};  // now_seconds() of the last confirmed renewal
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;    // guarded by mu_
  std::thread thread_;
};

// The epoch fence of a trainer's Redis writes (RedisTaskQueue's enqueues, RedisWeightRegistry's
// publications): Lua a write script starts with. The script's last key is NS:trainer:epoch and
// its last argument the writer's epoch ('0': unfenced); it returns {'fenced', epoch now} when a
// later trainer took the namespace. A counter below the writer's (a Redis that lost it) fences
// no one: the holder's lease renewal puts it back.
//   std::string script = std::string(kEpochFencePrologue) + body;
extern const char* const kEpochFencePrologue;
// Throws the "lost runtime.namespace" Error, saying `what` did not happen, when `reply` is the
// prologue's refusal; otherwise returns.
void throw_if_fenced(const RedisReply& reply, const std::string& ns, const std::string& epoch,
                     const std::string& what);

// nullptr for the in-process backend (one process: nothing to fence); else a RedisTrainerLease
// on runtime.namespace with runtime.trainer_lease_seconds.
std::unique_ptr<TrainerLease> open_trainer_lease(const RuntimeConfig& config, const std::string& holder);

}  // namespace moerl::runtime
