// URI-level operations behind `moerl store ls|cp|rm`: split a URI into a store and a key
// (s3://bucket/key, memory://name/key, a local path or file:///path), and copy, list or
// remove single objects or whole prefixes (recursive) between any two backends. Copies
// stream through files (local side directly; remote to remote through a temp file).
//
//   Location src = locate("s3://bucket/ckpt/step-1", {});
//   TransferStats st = copy_uri("/data/ckpt", "s3://bucket/ckpt", /*recursive=*/true, {});
// Not thread-safe per call (each call opens its own stores). Failures: moerl::Error naming
// the URI (kNotFound for a missing source, kInvalidInput for a malformed URI).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/object_store.h"

namespace moerl::store {

struct Location {
  std::unique_ptr<ObjectStore> store;  // rooted at the bucket / memory name / "/"
  std::string key;                     // object key or prefix inside it ("" for the root)
  bool local = false;
  std::string local_path;              // absolute path when local
  std::string uri;                     // as given
};

Location locate(const std::string& uri, const StoreOptions& options);

struct TransferStats {
  uint64_t objects = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

// Non-recursive: SRC is one object; DST ending in '/' (or an existing local directory)
// receives it under SRC's base name. Recursive: every object under SRC/ goes to DST/ with
// the same relative key.
TransferStats copy_uri(const std::string& src, const std::string& dst, bool recursive, const StoreOptions& options);
// Objects under the URI (a prefix; a local directory lists its files recursively).
std::vector<ObjectInfo> list_uri(const std::string& uri, const StoreOptions& options);
// Removes one object (missing: kNotFound), or with recursive every object under URI/.
uint64_t remove_uri(const std::string& uri, bool recursive, const StoreOptions& options);

}  // namespace moerl::store
