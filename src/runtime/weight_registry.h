// WeightRegistry: which policy version is the newest and where its weights live. The trainer
// publishes v+1 after writing the shards and manifest to the object store; rollout workers
// poll latest() or block in wait_newer(). The weight bytes never pass through here.
//
//   registry.publish(7, "s3://bucket/job42/weights/v7/manifest.json", d);  // trainer
//   auto v = registry.wait_newer(6, Deadline::after_seconds(30));         // worker: v->version == 7
// Versions must increase: publishing a version <= the latest throws moerl::Error (except an
// exact repeat of the latest, which is a no-op so retries after a lost reply are safe).
// Backends: InProcessWeightRegistry; RedisWeightRegistry (hash NS:weights:latest + stream
// NS:weights, both written by one Lua script behind the trainer epoch fence,
// runtime/trainer_lease.h). Thread-safe; every wait takes a deadline.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "base/deadline.h"
#include "runtime/redis_client.h"

namespace moerl::runtime {

struct WeightVersion {
  uint64_t version = 0;
  std::string location;  // object-store URL of the version's manifest
  int64_t published_unix_ms = 0;
};

class WeightRegistry {
 public:
  virtual ~WeightRegistry() = default;
  virtual void publish(uint64_t version, const std::string& location, Deadline deadline) = 0;
  virtual std::optional<WeightVersion> latest(Deadline deadline) = 0;
  // The newest version if it is > `version`, waiting for one until the deadline; nullopt if
  // none was published by then.
  virtual std::optional<WeightVersion> wait_newer(uint64_t version, Deadline deadline) = 0;
  // Fences publish() with the trainer lease's epoch (runtime/trainer_lease.h): once a later
  // trainer took the namespace it throws instead of publishing, so a replaced trainer that
  // wakes cannot point the workers at its weights. 0 (the default) publishes unfenced.
  virtual void set_epoch(uint64_t epoch) = 0;
};

class InProcessWeightRegistry : public WeightRegistry {
 public:
  void publish(uint64_t version, const std::string& location, Deadline deadline) override;
  std::optional<WeightVersion> latest(Deadline deadline) override;
  std::optional<WeightVersion> wait_newer(uint64_t version, Deadline deadline) override;
  void set_epoch(uint64_t) override {}  // one process: nothing to fence

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<WeightVersion> latest_;  // guarded by mu_
};

class RedisWeightRegistry : public WeightRegistry {
 public:
  RedisWeightRegistry(const RedisUrl& url, const std::string& ns, RedisOptions redis = {});
  void publish(uint64_t version, const std::string& location, Deadline deadline) override;
  std::optional<WeightVersion> latest(Deadline deadline) override;
  std::optional<WeightVersion> wait_newer(uint64_t version, Deadline deadline) override;
  void set_epoch(uint64_t epoch) override { epoch_ = epoch; }

 private:
  // Newest stream entry: its id and version.
  std::optional<std::pair<std::string, WeightVersion>> newest(Deadline deadline);

  const std::string ns_;
  const std::string stream_;
  const std::string latest_key_;
  const std::string epoch_key_;  // the trainer lease's epoch counter
  RedisClient client_;
  std::atomic<uint64_t> epoch_{0};  // set_epoch: the fence of publish()
};

int64_t unix_ms_now();

}  // namespace moerl::runtime
