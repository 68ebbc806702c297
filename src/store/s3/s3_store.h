// S3Store: the ObjectStore interface over S3 (or any S3-compatible endpoint), rooted at
// s3://bucket[/prefix]. Large files go up as multipart uploads with parts sent in parallel
// threads straight from the file (pread; never the whole file in memory) and come down as
// parallel ranged GETs written with pwrite into a temp file renamed at the end; an
// interrupted ranged GET resumes where it stopped. Uploads that fail are aborted. Each
// multipart upload has a marker object beside its key while it runs (upload_marker.h):
// list_pending() finds unfinished uploads through the markers, never with
// ListMultipartUploads (which IAM cannot scope to a prefix), and list() hides them. Manifests
// use put_if_absent (If-None-Match: *); a retry whose first attempt may have landed compares
// the stored bytes, so a lost response does not turn our own write into "already exists".
//
//   auto s = open_s3_store("s3://bucket/runs/r1", {});   // env / AWS credentials chain
//   s->put_file("ckpt/step-1/model.safetensors", "/tmp/model.safetensors");
// Thread-safe. Failures: moerl::Error as described in object_store.h, after S3Client's retries.
#pragma once

#include <memory>
#include <string>

#include "store/object_store.h"
#include "store/s3/s3_client.h"

namespace moerl::store::s3 {

class S3Store : public ObjectStore {
 public:
  // credentials == nullptr: the default AWS chain (credentials.h).
  S3Store(const std::string& uri, const S3Options& options, std::shared_ptr<CredentialsProvider> credentials = nullptr);

  std::string uri() const override { return uri_; }
  void put(const std::string& key, std::string_view bytes) override;
  void put_file(const std::string& key, const std::string& path) override;
  PutOutcome put_if_absent(const std::string& key, std::string_view bytes) override;
  std::string get(const std::string& key) override;
  std::string get_range(const std::string& key, uint64_t offset, uint64_t length) override;
  void get_file(const std::string& key, const std::string& path) override;
  std::optional<ObjectInfo> head(const std::string& key) override;
  void remove(const std::string& key) override;
  // Hides upload markers.
  std::vector<ObjectInfo> list(const std::string& prefix) override;
  // The uploads whose markers are under prefix (uploads no marker names are not found:
  // docs/formats/store_commit.md, "Upload markers"). initiated_unix is the marker's
  // LastModified. Markers that do not parse are skipped with a warning.
  std::vector<PendingUpload> list_pending(const std::string& prefix) override;
  // AbortMultipartUpload (NoSuchUpload counts as done), then deletes the marker.
  void abort_pending(const PendingUpload& upload) override;

  S3Client& client() { return *client_; }
  // Multipart upload of fd[0, size) to the full key, with its marker (exposed for tests;
  // put_file uses it).
  void multipart_upload(const std::string& full_key, int fd, uint64_t size);

 private:
  std::string full(const std::string& key) const;
  std::string relative(const std::string& full_key) const;
  // Every object under a full-key prefix, markers included, with full keys; sorted.
  std::vector<ObjectInfo> list_full(const std::string& full_prefix);
  void put_marker(const std::string& full_key, const std::string& upload_id);
  void abort_upload(const std::string& full_key, const std::string& upload_id);
  void download_range(const std::string& full_key, int fd, const std::string& path, uint64_t offset,
                      uint64_t length, uint64_t total, const std::string& etag);

  std::string uri_;     // immutable
  std::string prefix_;  // root prefix inside the bucket, no trailing '/'; immutable
  std::unique_ptr<S3Client> client_;
};

std::unique_ptr<ObjectStore> open_s3_store(const std::string& uri, const S3Options& options);

}  // namespace moerl::store::s3
