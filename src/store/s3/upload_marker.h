// Upload markers: how S3Store finds its own unfinished multipart uploads without
// ListMultipartUploads, an action IAM cannot scope to a prefix (S3 gives it no s3:prefix
// condition key). Each upload gets a small JSON object beside its target key, named from the
// key and the upload id; the format is durable (spec: docs/formats/store_commit.md, "Upload
// markers"). This file holds the names and the format; S3Store (s3_multipart.cc) writes,
// lists and deletes the markers.
//
//   std::string m = upload_marker_key("runs/r1/ckpt/step-1/model.bin", id);
//   // -> "runs/r1/ckpt/step-1/.model.bin.moerl-upload-<16 hex>"
//   upload_marker_target(m);   // -> "runs/r1/ckpt/step-1/model.bin"
// Stateless; thread-safe. parse() throws moerl::Error naming `where`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace moerl::store::s3 {

inline constexpr const char* kUploadMarkerMagic = "moerl-upload";
inline constexpr int kUploadMarkerVersion = 1;

struct UploadMarker {
  std::string key;         // full object key in the bucket that the upload creates
  std::string upload_id;   // as CreateMultipartUpload returned it
  int64_t initiated_unix = 0;  // writer's clock, seconds

  std::string to_json() const;  // with magic, version and checksum
  // Rejects a wrong magic, an unknown version, a bad checksum or missing fields, naming `where`.
  static UploadMarker parse(std::string_view text, const std::string& where);
};

// "DIR/NAME" -> "DIR/.NAME.moerl-upload-<first 16 hex digits of sha256(upload_id)>". Throws
// Error(kInvalidInput) when the marker key would pass S3's 1024-byte key limit.
std::string upload_marker_key(const std::string& key, const std::string& upload_id);
// The key a marker stands for, or nullopt when marker_key is not a marker's name.
std::optional<std::string> upload_marker_target(std::string_view marker_key);

}  // namespace moerl::store::s3
