// S3Store's multipart uploads and their markers: create, marker, parallel parts, complete or
// abort, marker gone; list_pending/abort_pending find and end the uploads a dead writer left,
// through the markers (upload_marker.h), never ListMultipartUploads.
#include <algorithm>
#include <ctime>
#include <exception>
#include <map>

#include "base/error.h"
#include "base/log.h"
#include "store/s3/parallel_for.h"
#include "store/s3/s3_store.h"
#include "store/s3/upload_marker.h"
#include "store/s3/xml.h"

namespace moerl::store::s3 {

static constexpr uint64_t kMaxParts = 10000;

void S3Store::put_marker(const std::string& k, const std::string& upload_id) {
  UploadMarker m{k, upload_id, static_cast<int64_t>(std::time(nullptr))};
  std::string body = m.to_json();
  S3Call c{"PutObject", "PUT", upload_marker_key(k, upload_id)};
  c.body = body;
  S3Result r = client_->execute(c);
  if (r.status != 200) client_->fail(c, r);
}

void S3Store::abort_upload(const std::string& k, const std::string& upload_id) {
  S3Call c{"AbortMultipartUpload", "DELETE", k, {{"uploadId", upload_id}}};
  S3Result r = client_->execute(c);
  if (r.status != 204 && r.status != 200 && r.error_code != "NoSuchUpload") client_->fail(c, r);
  // NOTE: only once the upload is gone: a marker is how a later cleanup() finds the upload.
  S3Call del{"DeleteObject", "DELETE", upload_marker_key(k, upload_id)};
  S3Result d = client_->execute(del);
  if (d.status != 204 && d.status != 200 && d.status != 404) client_->fail(del, d);
}

void S3Store::multipart_upload(const std::string& k, int fd, uint64_t size) {
  uint64_t part_size = std::max(client_->options().part_size, (size + kMaxParts - 1) / kMaxParts);
  part_size = (part_size + (1 << 20) - 1) & ~uint64_t{(1 << 20) - 1};
  uint64_t num_parts = std::max<uint64_t>(1, (size + part_size - 1) / part_size);
  upload_marker_key(k, "");  // a key too long for its marker fails here, before any upload exists

  S3Call create{"CreateMultipartUpload", "POST", k, {{"uploads", ""}}};
  S3Result cr = client_->execute(create);
  if (cr.status != 200) client_->fail(create, cr);
  std::string upload_id = parse_xml(cr.body, "CreateMultipartUpload response").text_of("UploadId");
  if (upload_id.empty()) {
    throw Error("CreateMultipartUpload " + client_->where(k) + ": response has no UploadId", "check the endpoint",
                ErrorCode::kIo);
  }
  auto abort_now = [&] {
    try {
      abort_upload(k, upload_id);
    } catch (const std::exception& e) {
      MOERL_LOG(WARN) << "s3: could not abort upload " << upload_id << " of " << client_->where(k) << ": " << e.what()
                      << " (cleanup() will abort it later)";
    }
  };
  // NOTE: a process that dies between CreateMultipartUpload and this PUT leaves an upload no
  // marker names; only the bucket's AbortIncompleteMultipartUpload rule removes it.
  try {
    put_marker(k, upload_id);
  } catch (...) {
    abort_now();
    throw;
  }

  std::vector<std::string> etags(num_parts);
  try {
    parallel_for(num_parts, client_->options().concurrency, [&](uint64_t i) {
      S3Call c{"UploadPart", "PUT", k, {{"partNumber", std::to_string(i + 1)}, {"uploadId", upload_id}}};
      c.body_fd = fd;
      c.body_offset = i * part_size;
      c.body_length = std::min(part_size, size - c.body_offset);
      S3Result r = client_->execute(c);
      if (r.status != 200) client_->fail(c, r);
      etags[i] = r.header("etag");
      if (etags[i].empty()) {
        throw Error("UploadPart " + client_->where(k) + " part " + std::to_string(i + 1) + ": no ETag in the response",
                    "check the endpoint", ErrorCode::kIo);
      }
    });
  } catch (...) {
    abort_now();
    throw;
  }

  std::string xml = "<CompleteMultipartUpload>";
  for (uint64_t i = 0; i < num_parts; ++i) {
    xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + xml_escape(etags[i]) + "</ETag></Part>";
  }
  xml += "</CompleteMultipartUpload>";
  S3Call done{"CompleteMultipartUpload", "POST", k, {{"uploadId", upload_id}}};
  done.body = xml;
  done.error_in_ok_body = true;
  S3Result r = client_->execute(done);
  bool completed = r.status == 200 && r.error_code.empty();
  // A retried Complete whose first attempt landed answers NoSuchUpload: the object is there.
  if (!completed && r.ambiguous && r.error_code == "NoSuchUpload") {
    auto h = head(relative(k));
    completed = h && h->size == size;
  }
  if (!completed) {
    abort_now();
    client_->fail(done, r);
  }
  try {
    remove(relative(upload_marker_key(k, upload_id)));
  } catch (const std::exception& e) {
    // Harmless: cleanup() aborts the finished upload (NoSuchUpload) and removes the marker.
    MOERL_LOG(WARN) << "s3: upload of " << client_->where(k) << " is complete but its marker stays: " << e.what();
  }
}

std::vector<PendingUpload> S3Store::list_pending(const std::string& prefix) {
  validate_prefix(prefix);
  std::string p = prefix_.empty() ? prefix : prefix_ + "/" + prefix;
  // Markers sit beside their targets: those of keys under p are under p, except when p ends
  // mid-name ("ckpt/step-1/mod"), where "ckpt/step-1/.model.bin.moerl-upload-*" is not.
  std::map<std::string, ObjectInfo> markers;
  std::vector<std::string> listings = {p};
  size_t name_at = p.rfind('/') == std::string::npos ? 0 : p.rfind('/') + 1;
  if (name_at < p.size()) listings.push_back(p.substr(0, name_at) + "." + p.substr(name_at));
  for (const std::string& l : listings) {
    for (ObjectInfo& o : list_full(l)) {
      auto target = upload_marker_target(o.key);
      if (target && target->compare(0, p.size(), p) == 0) markers[o.key] = std::move(o);
    }
  }
  std::vector<PendingUpload> out;
  for (const auto& [marker_key, info] : markers) {
    std::string target = *upload_marker_target(marker_key);
    S3Call c{"GetObject", "GET", marker_key};
    S3Result r = client_->execute(c);
    if (r.status == 404) continue;  // its upload finished meanwhile
    if (r.status != 200) client_->fail(c, r);
    try {
      UploadMarker m = UploadMarker::parse(r.body, client_->where(marker_key));
      if (m.key != target || upload_marker_key(m.key, m.upload_id) != marker_key) {
        throw Error("upload marker " + client_->where(marker_key) + " names key '" + m.key + "' and upload " +
                        m.upload_id + ", which do not belong at this marker's key",
                    "it was copied or renamed; remove it by hand once no upload uses it", ErrorCode::kIo);
      }
      out.push_back({relative(target), m.upload_id, info.mtime_unix});
    } catch (const Error& e) {
      MOERL_LOG(WARN) << "s3: skipping upload marker: " << e.what();
    }
  }
  std::sort(out.begin(), out.end(), [](const PendingUpload& a, const PendingUpload& b) {
    return a.key != b.key ? a.key < b.key : a.upload_id < b.upload_id;
  });
  return out;
}

void S3Store::abort_pending(const PendingUpload& upload) { abort_upload(full(upload.key), upload.upload_id); }

}  // namespace moerl::store::s3
