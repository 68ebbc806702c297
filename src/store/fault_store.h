// FaultInjectingStore: wraps another store and injects the failures storage code must
// survive (LevelDB fault_injection_test style): fail the k-th write, silently drop the k-th
// write, "crash" after n writes (every later call fails, as if the process died between two
// writes), and bursts of transient failures (what a 5xx/SlowDown burst looks like to a
// caller once the backend's own retries are exhausted). Writes are put, put_file and
// put_if_absent; with only_keys_containing set, only matching writes count.
//
//   auto inner = std::make_shared<MemoryStore>("t");
//   FaultInjectingStore s(inner, {.crash_after_writes = 2});
//   ... writer runs until it throws; then readers open `inner` and must see no partial commit.
// Thread-safe (counters under a mutex).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "store/object_store.h"

namespace moerl::store {

struct FaultPlan {
  int64_t fail_write_at = -1;       // that write (0-based) throws kIo and stores nothing
  int64_t drop_write_at = -1;       // that write reports success and stores nothing
  int64_t crash_after_writes = -1;  // after this many writes every call throws kUnavailable
  int64_t fail_next_calls = 0;      // the next N calls of any kind throw kUnavailable
  std::string only_keys_containing;
};

class FaultInjectingStore : public ObjectStore {
 public:
  FaultInjectingStore(std::shared_ptr<ObjectStore> inner, FaultPlan plan);

  void set_plan(FaultPlan plan);
  int64_t writes() const;         // writes seen so far (that matched the filter)
  int64_t injected() const;       // faults injected so far
  bool crashed() const;

  std::string uri() const override { return "fault+" + inner_->uri(); }
  void put(const std::string& key, std::string_view bytes) override;
  void put_file(const std::string& key, const std::string& path) override;
  PutOutcome put_if_absent(const std::string& key, std::string_view bytes) override;
  std::string get(const std::string& key) override;
  std::string get_range(const std::string& key, uint64_t offset, uint64_t length) override;
  void get_file(const std::string& key, const std::string& path) override;
  std::optional<ObjectInfo> head(const std::string& key) override;
  void remove(const std::string& key) override;
  std::vector<ObjectInfo> list(const std::string& prefix) override;
  std::vector<PendingUpload> list_pending(const std::string& prefix) override;
  void abort_pending(const PendingUpload& upload) override;

 private:
  enum class WriteAction { kWrite, kDrop };
  void before_call(const char* op, const std::string& key);
  WriteAction before_write(const char* op, const std::string& key);

  std::shared_ptr<ObjectStore> inner_;  // immutable pointer
  mutable std::mutex mu_;
  FaultPlan plan_;        // guarded by mu_
  int64_t writes_ = 0;    // guarded by mu_
  int64_t injected_ = 0;  // guarded by mu_
  bool crashed_ = false;  // guarded by mu_
};

}  // namespace moerl::store
