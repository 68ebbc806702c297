// MemoryStore: objects in process memory, for tests and single-process runs. Stores opened
// with the same memory://NAME share their contents for the life of the process.
//
//   auto s = open_store("memory://t1");  s->put("a", "x");  open_store("memory://t1")->get("a");
// Thread-safe (one mutex per named store).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "store/object_store.h"

namespace moerl::store {

class MemoryStore : public ObjectStore {
 public:
  // Shares contents with every other MemoryStore of the same name.
  explicit MemoryStore(const std::string& name);

  std::string uri() const override { return "memory://" + name_; }
  void put(const std::string& key, std::string_view bytes) override;
  void put_file(const std::string& key, const std::string& path) override;
  PutOutcome put_if_absent(const std::string& key, std::string_view bytes) override;
  std::string get(const std::string& key) override;
  std::string get_range(const std::string& key, uint64_t offset, uint64_t length) override;
  void get_file(const std::string& key, const std::string& path) override;
  std::optional<ObjectInfo> head(const std::string& key) override;
  void remove(const std::string& key) override;
  std::vector<ObjectInfo> list(const std::string& prefix) override;
  std::vector<PendingUpload> list_pending(const std::string&) override { return {}; }
  void abort_pending(const PendingUpload&) override {}

  // Test hook: sets an object's modification time (to age it past a cleanup grace period).
  void set_mtime(const std::string& key, int64_t mtime_unix);

 private:
  struct Entry {
    std::string data;
    uint64_t generation = 0;
    int64_t mtime_unix = 0;
  };
  struct State {
    std::mutex mu;
    std::map<std::string, Entry> objects;  // guarded by mu
    uint64_t next_generation = 1;          // guarded by mu
  };
  ObjectInfo info(const std::string& key, const Entry& e) const;

  std::string name_;
  std::shared_ptr<State> state_;  // shared by name; immutable pointer
};

}  // namespace moerl::store
