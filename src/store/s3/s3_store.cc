// S3Store: ObjectStore operations as S3 calls; parallel ranged download. Multipart uploads and
// their markers are in s3_multipart.cc.
#include "store/s3/s3_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "base/error.h"
#include "base/files.h"
#include "store/file_util.h"
#include "store/s3/parallel_for.h"
#include "store/s3/sigv4.h"
#include "store/s3/upload_marker.h"
#include "store/s3/xml.h"

namespace moerl::store::s3 {

static constexpr uint64_t kMinPartSize = 5ull << 20;

S3Store::S3Store(const std::string& uri, const S3Options& options, std::shared_ptr<CredentialsProvider> credentials) {
  if (uri.rfind("s3://", 0) != 0) throw Error("'" + uri + "' is not an s3:// URI", "write s3://bucket/prefix");
  std::string rest = uri.substr(5);
  size_t slash = rest.find('/');
  std::string bucket = rest.substr(0, slash);
  prefix_ = slash == std::string::npos ? "" : rest.substr(slash + 1);
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
  if (bucket.empty()) throw Error("S3 URI '" + uri + "' has no bucket", "write s3://bucket/prefix");
  if (!prefix_.empty()) validate_key(prefix_);
  uri_ = "s3://" + bucket + (prefix_.empty() ? "" : "/" + prefix_);
  if (options.part_size < kMinPartSize) {
    throw Error("S3 part size " + std::to_string(options.part_size) + " bytes is below S3's 5 MiB minimum",
                "set [store].part_size_mib >= 5");
  }
  if (!credentials) credentials = default_credentials_provider(S3Client::resolve_region(options));
  client_ = std::make_unique<S3Client>(options, bucket, std::move(credentials));
}

std::unique_ptr<ObjectStore> open_s3_store(const std::string& uri, const S3Options& options) {
  return std::make_unique<S3Store>(uri, options);
}

std::string S3Store::full(const std::string& key) const {
  validate_key(key);
  return join_key(prefix_, key);
}

std::string S3Store::relative(const std::string& full_key) const {
  if (prefix_.empty()) return full_key;
  return full_key.substr(std::min(full_key.size(), prefix_.size() + 1));
}

void S3Store::put(const std::string& key, std::string_view bytes) {
  S3Call c{"PutObject", "PUT", full(key)};
  c.body = bytes;
  S3Result r = client_->execute(c);
  if (r.status != 200) client_->fail(c, r);
}

namespace {
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};
}  // namespace

void S3Store::put_file(const std::string& key, const std::string& path) {
  std::string k = full(key);
  uint64_t size = file_size(path);
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw io_error("open", path, errno, uri_);
  if (size < client_->options().multipart_threshold) {
    S3Call c{"PutObject", "PUT", k};
    c.body_fd = f.fd;
    c.body_length = size;
    S3Result r = client_->execute(c);
    if (r.status != 200) client_->fail(c, r);
    return;
  }
  multipart_upload(k, f.fd, size);
}

PutOutcome S3Store::put_if_absent(const std::string& key, std::string_view bytes) {
  S3Call c{"PutObject", "PUT", full(key)};
  c.body = bytes;
  c.headers = {{"If-None-Match", "*"}};
  S3Result r = client_->execute(c);
  if (r.status == 200) return PutOutcome::kCreated;
  if (r.status == 412) {
    // If an earlier attempt may have landed, the object there may be our own write.
    if (r.ambiguous && get(key) == bytes) return PutOutcome::kCreated;
    return PutOutcome::kAlreadyExists;
  }
  if (r.status == 501) {
    throw Error("PutObject " + client_->where(c.key) + " with If-None-Match: * is not supported by this endpoint",
                "the commit protocol needs conditional writes; use AWS S3 or a server that supports them",
                ErrorCode::kInvalidInput);
  }
  client_->fail(c, r);
}

std::string S3Store::get(const std::string& key) {
  S3Call c{"GetObject", "GET", full(key)};
  S3Result r = client_->execute(c);
  if (r.status != 200) client_->fail(c, r);
  return std::move(r.body);
}

std::string S3Store::get_range(const std::string& key, uint64_t offset, uint64_t length) {
  auto out_of_range = [&](uint64_t size) {
    return Error(uri_ + ": range offset " + std::to_string(offset) + " is past the end of '" + key + "' (" +
                     std::to_string(size) + " bytes)",
                 "read at offsets below the object's size (see head())");
  };
  if (length == 0) {
    auto h = head(key);
    if (!h) throw Error(uri_ + ": no object '" + key + "'", "list the prefix with `moerl store ls`", ErrorCode::kNotFound);
    if (offset > h->size) throw out_of_range(h->size);
    return "";
  }
  S3Call c{"GetObject", "GET", full(key)};
  c.headers = {{"Range", "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1)}};
  S3Result r = client_->execute(c);
  if (r.status == 206) {
    // Trust Content-Range over the body length: some servers widen "bytes=0-0".
    std::string cr = r.header("content-range");
    uint64_t start = cr.rfind("bytes ", 0) == 0 ? std::stoull(cr.substr(6)) : offset;
    if (start != offset) {
      throw Error("GetObject " + client_->where(c.key) + ": asked for bytes from " + std::to_string(offset) +
                      ", server sent Content-Range '" + cr + "'",
                  "the endpoint mishandles ranges", ErrorCode::kIo);
    }
    if (r.body.size() > length) r.body.resize(length);
    return std::move(r.body);
  }
  if (r.status == 200) return r.body.substr(std::min<uint64_t>(offset, r.body.size()), length);  // range ignored
  if (r.status == 416) {
    auto h = head(key);
    if (h && offset == h->size) return "";
    throw out_of_range(h ? h->size : 0);
  }
  client_->fail(c, r);
}

void S3Store::download_range(const std::string& k, int fd, const std::string& path, uint64_t offset, uint64_t length,
                             uint64_t total, const std::string& etag) {
  uint64_t got = 0;
  S3Call c{"GetObject", "GET", k};
  c.sink = [&](const char* d, size_t n) {
    if (got + n > length) return false;
    pwrite_all(fd, d, n, offset + got, path);
    got += n;
    return true;
  };
  // Each attempt asks only for what is still missing (resume after a dropped connection).
  c.before_attempt = [&](S3Call& call) {
    call.headers = {{"Range", "bytes=" + std::to_string(offset + got) + "-" + std::to_string(offset + length - 1)}};
    if (!etag.empty()) call.headers.push_back({"If-Match", etag});
  };
  S3Result r = client_->execute(c);
  if (r.status == 412) {
    throw Error("GetObject " + client_->where(k) + ": the object changed during the download", "retry the download",
                ErrorCode::kIo);
  }
  if (r.status != 206 && r.status != 200) client_->fail(c, r);
  if (r.status == 200 && (offset != 0 || length != total)) {
    throw Error("GetObject " + client_->where(k) + ": the endpoint ignored the Range header (HTTP 200 for bytes " +
                    std::to_string(offset) + "+" + std::to_string(length) + ")",
                "set [store].part_size_mib above the object size to download it in one request", ErrorCode::kIo);
  }
  if (got != length) {
    throw Error("GetObject " + client_->where(k) + ": got " + std::to_string(got) + " of " + std::to_string(length) +
                    " bytes at offset " + std::to_string(offset),
                "retry; the endpoint closed the transfer early", ErrorCode::kIo);
  }
}

void S3Store::get_file(const std::string& key, const std::string& path) {
  std::string k = full(key);
  auto h = head(key);
  if (!h) throw Error(uri_ + ": no object '" + key + "'", "list the prefix with `moerl store ls`", ErrorCode::kNotFound);
  AtomicFile f(path);
  const std::string& tmp = f.temp_path();
  if (h->size > 0 && ::ftruncate(f.fd(), static_cast<off_t>(h->size)) != 0) throw io_error("allocate", tmp, errno, uri_);
  uint64_t chunk = client_->options().part_size;
  uint64_t num_chunks = h->size == 0 ? 0 : (h->size + chunk - 1) / chunk;
  parallel_for(num_chunks, client_->options().concurrency, [&](uint64_t i) {
    download_range(k, f.fd(), tmp, i * chunk, std::min(chunk, h->size - i * chunk), h->size, h->etag);
  });
  f.commit();
}

std::optional<ObjectInfo> S3Store::head(const std::string& key) {
  S3Call c{"HeadObject", "HEAD", full(key)};
  S3Result r = client_->execute(c);
  if (r.status == 404) return std::nullopt;
  if (r.status != 200) client_->fail(c, r);
  ObjectInfo o;
  o.key = key;
  o.size = std::stoull(r.header("content-length").empty() ? "0" : r.header("content-length"));
  o.etag = r.header("etag");
  o.mtime_unix = parse_http_date(r.header("last-modified"));
  return o;
}

void S3Store::remove(const std::string& key) {
  S3Call c{"DeleteObject", "DELETE", full(key)};
  S3Result r = client_->execute(c);
  if (r.status == 204 || r.status == 200 || r.status == 404) return;
  client_->fail(c, r);
}

std::vector<ObjectInfo> S3Store::list_full(const std::string& p) {
  std::vector<ObjectInfo> out;
  std::string token;
  for (int page = 0;; ++page) {
    S3Call c{"ListObjectsV2", "GET", "",
             {{"list-type", "2"}, {"prefix", p}, {"max-keys", std::to_string(client_->options().list_page_size)}}};
    if (!token.empty()) c.query.push_back({"continuation-token", token});
    S3Result r = client_->execute(c);
    if (r.status != 200) client_->fail(c, r);
    XmlNode doc = parse_xml(r.body, "ListObjectsV2 response");
    for (const XmlNode* o : doc.all("Contents")) {
      std::string k = o->text_of("Key");
      if (k.compare(0, p.size(), p) != 0) continue;
      out.push_back({k, std::stoull(o->text_of("Size", "0")), o->text_of("ETag"),
                     parse_iso8601(o->text_of("LastModified")).value_or(0)});
    }
    if (doc.text_of("IsTruncated") != "true") break;
    token = doc.text_of("NextContinuationToken");
    if (token.empty()) {
      throw Error("ListObjectsV2 " + client_->where(p) + ": truncated page without NextContinuationToken",
                  "the endpoint is not S3-compatible enough for listing", ErrorCode::kIo);
    }
  }
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

std::vector<ObjectInfo> S3Store::list(const std::string& prefix) {
  validate_prefix(prefix);
  std::vector<ObjectInfo> out;
  for (ObjectInfo& o : list_full(prefix_.empty() ? prefix : prefix_ + "/" + prefix)) {
    if (upload_marker_target(o.key)) continue;  // S3Store's bookkeeping, not an object
    o.key = relative(o.key);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace moerl::store::s3
