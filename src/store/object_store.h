// The object-store interface the rest of moerl uses for checkpoints, published weight
// versions and run artifacts, and open_store(uri) which picks the backend:
//   /abs/path, rel/path, file:///abs/path -> LocalStore (temp file, fsync, rename)
//   s3://bucket[/prefix]                  -> S3Store (SigV4 over libcurl, see s3/s3_store.h)
//   memory://name                         -> MemoryStore (process-local, for tests)
// Keys are relative to the store's root ("ckpt/step-000100/model.safetensors"): '/'-separated,
// no empty, "." or ".." segments, no leading '/'. The store does not know what it stores;
// the commit protocol on top is in store/commit.h.
//
//   auto store = open_store("s3://my-bucket/runs/r1");
//   store->put_file("ckpt/step-1/model.safetensors", "/tmp/model.safetensors");
//   std::string cfg = store->get("ckpt/step-1/config.json");
//   for (const ObjectInfo& o : store->list("ckpt/")) ...
//
// Thread-safety: every implementation is safe for concurrent calls from many threads.
// Failures: calls throw moerl::Error naming the store URI and key (kNotFound for a missing
// key in get/get_range/get_file, kIo/kUnavailable/kTimeout for disk and network after the
// backend's retries, kInvalidInput for a malformed key or URI). A put either stores the whole
// object or leaves the previous state visible: no reader ever sees a partial object.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moerl {
class ConfigTable;
}

namespace moerl::store {

struct ObjectInfo {
  std::string key;         // relative to the store root
  uint64_t size = 0;
  std::string etag;        // opaque; changes when the content changes
  int64_t mtime_unix = 0;  // last modification, seconds since the epoch
};

// An unfinished write the backend keeps around: an S3 multipart upload, or a local temp file.
struct PendingUpload {
  std::string key;
  std::string upload_id;
  int64_t initiated_unix = 0;
};

enum class PutOutcome { kCreated, kAlreadyExists };

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;
  // The URI this store was opened with (no credentials in it).
  virtual std::string uri() const = 0;

  virtual void put(const std::string& key, std::string_view bytes) = 0;
  // Streams the file (multipart for large files on S3); the file is never read whole into memory.
  virtual void put_file(const std::string& key, const std::string& path) = 0;
  // Conditional create: stores bytes only if no object has that key (S3: If-None-Match: *;
  // local: link(2), which fails on an existing name). Returns kAlreadyExists otherwise.
  virtual PutOutcome put_if_absent(const std::string& key, std::string_view bytes) = 0;

  virtual std::string get(const std::string& key) = 0;
  // Bytes [offset, min(offset + length, size)); offset > size is kInvalidInput.
  virtual std::string get_range(const std::string& key, uint64_t offset, uint64_t length) = 0;
  // Streams into path via a temp file renamed at the end: path is complete or untouched.
  virtual void get_file(const std::string& key, const std::string& path) = 0;
  virtual std::optional<ObjectInfo> head(const std::string& key) = 0;
  // Idempotent: removing a missing key succeeds.
  virtual void remove(const std::string& key) = 0;
  // Every object whose key starts with prefix (all pages), sorted by key.
  virtual std::vector<ObjectInfo> list(const std::string& prefix) = 0;

  // Unfinished uploads under prefix, and abort one (idempotent), for cleanup(). S3: the
  // multipart uploads its upload markers name (s3/upload_marker.h).
  virtual std::vector<PendingUpload> list_pending(const std::string& prefix) = 0;
  virtual void abort_pending(const PendingUpload& upload) = 0;
};

enum class Addressing { kAuto, kPath, kVirtual };

// S3 client settings; defaults suit AWS, env and [store] config override them.
struct S3Options {
  std::string endpoint;          // "" -> AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, then AWS
  std::string region;            // "" -> AWS_REGION, AWS_DEFAULT_REGION, then us-east-1
  Addressing addressing = Addressing::kAuto;  // auto: path-style for custom endpoints
  uint64_t part_size = 16ull << 20;            // multipart part size (5 MiB .. 5 GiB)
  uint64_t multipart_threshold = 32ull << 20;  // files at least this big go multipart
  int concurrency = 8;                         // parallel parts / ranged GETs per transfer
  int list_page_size = 1000;                   // max-keys per ListObjectsV2 page
  int max_attempts = 10;                       // per request, first try included
  double base_backoff_s = 0.1;                 // full-jitter exponential backoff
  double max_backoff_s = 5.0;
  double request_deadline_s = 900;             // bound on one request with all its retries
  double connect_timeout_s = 10;
  double stall_timeout_s = 60;                 // abort an attempt that moves < 1 KiB/s this long
};

struct StoreOptions {
  S3Options s3;
};

// Reads a [store] table: endpoint, region, addressing ("auto"|"path"|"virtual"),
// part_size_mib, multipart_threshold_mib, concurrency, max_attempts, request_deadline_s.
StoreOptions store_options_from_config(ConfigTable& table);

std::unique_ptr<ObjectStore> open_store(const std::string& uri, const StoreOptions& options = {});

// Throws Error(kInvalidInput) when key is not a valid relative key (see the file header).
void validate_key(const std::string& key);
// A list() prefix: any string without "." / ".." segments or a leading '/'.
void validate_prefix(const std::string& prefix);
// "a/b" + "c" -> "a/b/c"; either side may be empty.
std::string join_key(const std::string& a, const std::string& b);

}  // namespace moerl::store
