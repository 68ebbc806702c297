// open_store(uri): backend by URI scheme; key validation shared by all backends.
#include "store/object_store.h"

#include "base/config.h"
#include "base/error.h"
#include "store/local_store.h"
#include "store/memory_store.h"
#include "store/s3/s3_store.h"

namespace moerl::store {

static bool bad_segment(std::string_view seg) { return seg.empty() || seg == "." || seg == ".."; }

void validate_key(const std::string& key) {
  auto fail = [&](const std::string& why) {
    throw Error("object key '" + key + "' " + why,
                "keys are relative, '/'-separated names like ckpt/step-000100/model.safetensors");
  };
  if (key.empty()) fail("is empty");
  if (key.front() == '/') fail("starts with '/'");
  if (key.find('\0') != std::string::npos) fail("contains a NUL byte");
  if (key.size() > 1024) fail("is longer than 1024 bytes");
  size_t start = 0;
  while (true) {
    size_t end = key.find('/', start);
    std::string_view seg(key.data() + start, (end == std::string::npos ? key.size() : end) - start);
    if (bad_segment(seg)) fail("has an empty, '.' or '..' segment");
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

void validate_prefix(const std::string& prefix) {
  if (prefix.empty()) return;
  std::string trimmed = prefix;
  if (trimmed.back() == '/') trimmed.pop_back();
  if (trimmed.empty()) {
    throw Error("list prefix '/' is absolute", "list with an empty prefix for everything, or a relative one");
  }
  // A partial last segment ("ckpt/ste") is fine; only the complete ones must be valid.
  size_t last = trimmed.rfind('/');
  if (last != std::string::npos) validate_key(trimmed.substr(0, last));
  if (trimmed.front() == '/' || trimmed.substr(last == std::string::npos ? 0 : last + 1) == "..") {
    throw Error("list prefix '" + prefix + "' is not a relative key prefix", "use a prefix like ckpt/");
  }
}

std::string join_key(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a.back() == '/' ? a + b : a + "/" + b;
}

std::unique_ptr<ObjectStore> open_store(const std::string& uri, const StoreOptions& options) {
  if (uri.empty()) {
    throw Error("store URI is empty", "give a directory, file:///path, s3://bucket/prefix or memory://name");
  }
  if (uri.rfind("s3://", 0) == 0) return s3::open_s3_store(uri, options.s3);
  if (uri.rfind("memory://", 0) == 0) {
    std::string name = uri.substr(9);
    if (name.empty()) throw Error("store URI '" + uri + "' has no name", "write memory://NAME");
    return std::make_unique<MemoryStore>(name);
  }
  if (uri.rfind("file://", 0) == 0) {
    if (uri.size() <= 7 || uri[7] != '/') {
      throw Error("store URI '" + uri + "' is not file:///absolute/path", "write file:///data/run1 or a plain path");
    }
    return std::make_unique<LocalStore>(uri.substr(7));
  }
  size_t scheme = uri.find("://");
  if (scheme != std::string::npos && uri.find('/') > scheme) {
    throw Error("store URI '" + uri + "' has an unknown scheme '" + uri.substr(0, scheme) + "'",
                "supported: a plain path, file://, s3://, memory://");
  }
  return std::make_unique<LocalStore>(uri);
}

StoreOptions store_options_from_config(ConfigTable& t) {
  StoreOptions o;
  S3Options& s = o.s3;
  s.endpoint = t.string("endpoint", s.endpoint);
  s.region = t.string("region", s.region);
  std::string addressing = t.choice("addressing", "auto", {"auto", "path", "virtual"});
  s.addressing = addressing == "path" ? Addressing::kPath : addressing == "virtual" ? Addressing::kVirtual : Addressing::kAuto;
  s.part_size = static_cast<uint64_t>(t.integer("part_size_mib", static_cast<int64_t>(s.part_size >> 20), {.min = 5, .max = 5120})) << 20;
  s.multipart_threshold = static_cast<uint64_t>(t.integer("multipart_threshold_mib", static_cast<int64_t>(s.multipart_threshold >> 20), {.min = 5, .max = 5120})) << 20;
  s.concurrency = static_cast<int>(t.integer("concurrency", s.concurrency, {.min = 1, .max = 64}));
  s.max_attempts = static_cast<int>(t.integer("max_attempts", s.max_attempts, {.min = 1, .max = 100}));
  s.request_deadline_s = t.number("request_deadline_s", s.request_deadline_s, {.min = 1, .max = 86400});
  return o;
}

}  // namespace moerl::store
