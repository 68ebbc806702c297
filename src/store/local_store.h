// LocalStore: objects as files under a root directory. A put is a base/files AtomicFile: a
// temp file beside the target (".NAME.moerl-tmp-..."), fsynced, renamed over the target, then
// a directory fsync; put_if_absent links the temp file to the target (link(2) fails on an
// existing name), so a conditional create is atomic. Listing skips temp files; list_pending returns
// them (a crashed writer's leftovers) for cleanup().
//
//   LocalStore s("/data/run1");  s.put("ckpt/a.bin", bytes);   // -> /data/run1/ckpt/a.bin
// Thread-safe (temp names are unique per call); safe across processes sharing the directory.
#pragma once

#include <string>

#include "store/object_store.h"

namespace moerl::store {

class LocalStore : public ObjectStore {
 public:
  explicit LocalStore(const std::string& root);

  std::string uri() const override { return "file://" + root_; }
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

  const std::string& root() const { return root_; }

 private:
  std::string path_of(const std::string& key) const;
  int open_for(const std::string& key, std::string* path) const;

  std::string root_;  // absolute, no trailing '/'; immutable after construction
};

}  // namespace moerl::store
