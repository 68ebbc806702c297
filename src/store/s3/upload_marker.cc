// Upload markers: names beside the target key, and the checksummed JSON body.
#include "store/s3/upload_marker.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/checksum.h"

namespace moerl::store::s3 {

using nlohmann::json;

static constexpr const char* kTag = ".moerl-upload-";
static constexpr size_t kIdDigits = 16;
static constexpr size_t kMaxKeyBytes = 1024;  // S3's limit on a key

std::string UploadMarker::to_json() const {
  json j = {{"magic", kUploadMarkerMagic}, {"version", kUploadMarkerVersion}, {"key", key},
            {"upload_id", upload_id}, {"initiated_unix", initiated_unix}};
  // NOTE: nlohmann::json keeps object keys sorted, so dump() is canonical for the checksum.
  j["checksum"] = io::sha256_hex(j.dump());
  return j.dump() + "\n";
}

UploadMarker UploadMarker::parse(std::string_view text, const std::string& where) {
  auto bad = [&](const std::string& why) {
    return Error("upload marker " + where + ": " + why,
                 "it was not written by moerl or was altered; remove it by hand once no upload uses it",
                 ErrorCode::kIo);
  };
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    throw bad(std::string("not JSON (") + e.what() + ")");
  }
  if (!j.is_object() || j.value("magic", "") != kUploadMarkerMagic) throw bad("magic is not \"moerl-upload\"");
  if (!j.contains("version") || !j["version"].is_number_integer()) throw bad("no integer version");
  if (j["version"].get<int>() != kUploadMarkerVersion) {
    throw Error("upload marker " + where + ": version " + std::to_string(j["version"].get<int>()) +
                    " is not supported (this moerl reads version " + std::to_string(kUploadMarkerVersion) + ")",
                "run `moerl store cleanup` with the moerl version that wrote it", ErrorCode::kInvalidInput);
  }
  std::string checksum = j.value("checksum", "");
  j.erase("checksum");
  if (checksum != io::sha256_hex(j.dump())) throw bad("checksum mismatch (the marker was altered or truncated)");
  UploadMarker m;
  try {
    m.key = j.at("key").get<std::string>();
    m.upload_id = j.at("upload_id").get<std::string>();
    m.initiated_unix = j.at("initiated_unix").get<int64_t>();
  } catch (const json::exception& e) {
    throw bad(std::string("missing or mistyped field (") + e.what() + ")");
  }
  if (m.key.empty() || m.upload_id.empty()) throw bad("empty key or upload_id");
  return m;
}

std::string upload_marker_key(const std::string& key, const std::string& upload_id) {
  size_t slash = key.rfind('/');
  size_t name_at = slash == std::string::npos ? 0 : slash + 1;
  std::string marker = key.substr(0, name_at) + "." + key.substr(name_at) + kTag +
                       io::sha256_hex(upload_id).substr(0, kIdDigits);
  if (marker.size() > kMaxKeyBytes) {
    throw Error("object key '" + key + "' is too long for a multipart upload: its upload marker '" + marker +
                    "' passes S3's " + std::to_string(kMaxKeyBytes) + "-byte key limit",
                "shorten the key (or the store prefix) by " + std::to_string(marker.size() - kMaxKeyBytes) +
                    " bytes, or raise [store].multipart_threshold_mib above the file's size");
  }
  return marker;
}

std::optional<std::string> upload_marker_target(std::string_view marker_key) {
  size_t slash = marker_key.rfind('/');
  size_t name_at = slash == std::string_view::npos ? 0 : slash + 1;
  std::string_view name = marker_key.substr(name_at);
  const size_t tag_len = std::char_traits<char>::length(kTag);
  // "." + NAME (non-empty) + tag + digits
  if (name.size() < 2 + tag_len + kIdDigits || name.front() != '.') return std::nullopt;
  std::string_view digits = name.substr(name.size() - kIdDigits);
  if (digits.find_first_not_of("0123456789abcdef") != std::string_view::npos) return std::nullopt;
  if (name.substr(name.size() - kIdDigits - tag_len, tag_len) != kTag) return std::nullopt;
  return std::string(marker_key.substr(0, name_at)) + std::string(name.substr(1, name.size() - 1 - tag_len - kIdDigits));
}

}  // namespace moerl::store::s3
