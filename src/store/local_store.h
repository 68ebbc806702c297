// LocalStore: objects as files under a root directory. A put writes a temp file beside the
// target (".NAME.moerl-tmp-..."), fsyncs it, renames it over the target and fsyncs the
// directory; put_if_absent links the temp file to the target (link(2) fails on an existing
// name), so a conditional create is atomic. Listing skips temp files; list_pending returns
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
  std::string write_temp(const std::string& final_path, std::string_view bytes, const std::string* src) const;

  std::string root_;  // absolute, no trailing '/'; immutable after construction
};

// True for the temp-file names LocalStore writes (and hides from list()).
bool is_local_temp_name(const std::string& filename);

}  // namespace moerl::store
