// `moerl store` operations over URIs: locate, copy (single / recursive), list, remove.
#include "store/transfer.h"

#include <unistd.h>

#include <filesystem>

#include "base/deadline.h"
#include "base/error.h"
#include "store/local_store.h"

namespace fs = std::filesystem;

namespace moerl::store {

Location locate(const std::string& uri, const StoreOptions& options) {
  Location loc;
  loc.uri = uri;
  auto split = [&](size_t scheme_len) {
    std::string rest = uri.substr(scheme_len);
    size_t slash = rest.find('/');
    std::string root = uri.substr(0, scheme_len) + rest.substr(0, slash);
    loc.store = open_store(root, options);
    loc.key = slash == std::string::npos ? "" : rest.substr(slash + 1);
  };
  if (uri.rfind("s3://", 0) == 0) {
    split(5);
  } else if (uri.rfind("memory://", 0) == 0) {
    split(9);
  } else {
    size_t scheme = uri.find("://");
    if (scheme != std::string::npos && uri.rfind("file://", 0) != 0 && uri.find('/') > scheme) {
      throw Error("'" + uri + "' has an unknown scheme '" + uri.substr(0, scheme) + "'",
                  "use a local path, file:///path, s3://bucket/key or memory://name/key");
    }
    std::string path = uri.rfind("file://", 0) == 0 ? uri.substr(7) : uri;
    if (path.empty()) throw Error("empty path", "give a file or directory path");
    bool dir_hint = path.back() == '/';
    loc.local = true;
    loc.local_path = fs::absolute(path).lexically_normal().string();
    if (loc.local_path.size() > 1 && loc.local_path.back() == '/') loc.local_path.pop_back();
    loc.store = std::make_unique<LocalStore>("/");
    loc.key = loc.local_path == "/" ? "" : loc.local_path.substr(1);
    if (dir_hint && !loc.key.empty()) loc.key += "/";
  }
  return loc;
}

static std::string base_name(const std::string& key) {
  std::string k = key;
  while (!k.empty() && k.back() == '/') k.pop_back();
  size_t slash = k.rfind('/');
  return slash == std::string::npos ? k : k.substr(slash + 1);
}

static std::string as_dir(std::string key) {
  if (!key.empty() && key.back() != '/') key += "/";
  return key;
}

static uint64_t copy_one(Location& src, const std::string& src_key, Location& dst, const std::string& dst_key) {
  if (src.local) {
    std::string path = "/" + src_key;
    uint64_t size = fs::file_size(path);
    dst.store->put_file(dst_key, path);
    return size;
  }
  auto h = src.store->head(src_key);
  if (!h) {
    throw Error(src.store->uri() + ": no object '" + src_key + "'", "list it with `moerl store ls`", ErrorCode::kNotFound);
  }
  if (dst.local) {
    std::string path = "/" + dst_key;
    fs::create_directories(fs::path(path).parent_path());
    src.store->get_file(src_key, path);
    return h->size;
  }
  // Remote to remote: through a temp file, never the whole object in memory.
  std::string tmpl = (fs::temp_directory_path() / "moerl-cp-XXXXXX").string();
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw Error("cannot create a temp file in " + fs::temp_directory_path().string(), "set TMPDIR", ErrorCode::kIo);
  ::close(fd);
  try {
    src.store->get_file(src_key, tmpl);
    dst.store->put_file(dst_key, tmpl);
  } catch (...) {
    ::unlink(tmpl.c_str());
    throw;
  }
  ::unlink(tmpl.c_str());
  return h->size;
}

TransferStats copy_uri(const std::string& src_uri, const std::string& dst_uri, bool recursive,
                       const StoreOptions& options) {
  Location src = locate(src_uri, options);
  Location dst = locate(dst_uri, options);
  TransferStats st;
  double t0 = now_seconds();
  if (!recursive) {
    if (src.key.empty() || src.key.back() == '/' || (src.local && fs::is_directory(src.local_path))) {
      throw Error("cp: '" + src_uri + "' is a directory or prefix", "use `moerl store cp -r` to copy everything under it");
    }
    if (src.local && !fs::exists(src.local_path)) {
      throw Error("cp: no file '" + src_uri + "'", "check the source path", ErrorCode::kNotFound);
    }
    std::string dst_key = dst.key;
    if (dst_key.empty() || dst_key.back() == '/' || (dst.local && fs::is_directory(dst.local_path))) {
      dst_key = as_dir(dst_key) + base_name(src.key);
    }
    st.bytes = copy_one(src, src.key, dst, dst_key);
    st.objects = 1;
  } else {
    std::string prefix = as_dir(src.key);
    auto objects = src.store->list(prefix);
    if (objects.empty()) {
      throw Error("cp -r: nothing under '" + src_uri + "'", "check the source prefix with `moerl store ls`",
                  ErrorCode::kNotFound);
    }
    std::string dst_prefix = as_dir(dst.key);
    for (const auto& o : objects) {
      st.bytes += copy_one(src, o.key, dst, dst_prefix + o.key.substr(prefix.size()));
      ++st.objects;
    }
  }
  st.seconds = now_seconds() - t0;
  return st;
}

std::vector<ObjectInfo> list_uri(const std::string& uri, const StoreOptions& options) {
  Location loc = locate(uri, options);
  std::string prefix = loc.key;
  if (loc.local) {
    if (!fs::exists(loc.local_path)) throw Error("ls: no such path '" + uri + "'", "check the path", ErrorCode::kNotFound);
    if (fs::is_directory(loc.local_path)) prefix = as_dir(prefix);
  }
  return loc.store->list(prefix);
}

uint64_t remove_uri(const std::string& uri, bool recursive, const StoreOptions& options) {
  Location loc = locate(uri, options);
  if (!recursive) {
    if (loc.key.empty() || loc.key.back() == '/' || (loc.local && fs::is_directory(loc.local_path))) {
      throw Error("rm: '" + uri + "' is a directory or prefix", "use `moerl store rm -r` to remove everything under it");
    }
    if (!loc.store->head(loc.key)) {
      throw Error("rm: no object '" + uri + "'", "list it with `moerl store ls`", ErrorCode::kNotFound);
    }
    loc.store->remove(loc.key);
    return 1;
  }
  if (loc.key.empty()) {
    throw Error("rm -r: refusing to remove a whole bucket or filesystem root ('" + uri + "')",
                "name a prefix, e.g. s3://bucket/runs/old");
  }
  auto objects = loc.store->list(as_dir(loc.key));
  for (const auto& o : objects) loc.store->remove(o.key);
  return objects.size();
}

}  // namespace moerl::store
