// LocalStore: base/files AtomicFile (temp file + fsync + rename, or link for a conditional
// create) for writes, directory walks for listing.
#include "store/local_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/error.h"
#include "base/files.h"
#include "store/file_util.h"

namespace fs = std::filesystem;

namespace moerl::store {

LocalStore::LocalStore(const std::string& root) {
  std::string r = root;
  if (r.rfind("file://", 0) == 0) r = r.substr(7);
  if (r.empty()) throw Error("local store: empty path", "give a directory, e.g. ./runs/r1 or file:///data/r1");
  fs::path p = fs::absolute(fs::path(r)).lexically_normal();
  root_ = p.string();
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::string LocalStore::path_of(const std::string& key) const {
  validate_key(key);
  return root_ == "/" ? "/" + key : root_ + "/" + key;
}

// NOTE: a concurrent remove() may prune the parent directory; AtomicFile recreates it.
static constexpr AtomicFileOptions kCreateDirs{.parent_dirs = ParentDirs::kCreate};

void LocalStore::put(const std::string& key, std::string_view bytes) {
  write_file_atomic(path_of(key), bytes, kCreateDirs);
}

void LocalStore::put_file(const std::string& key, const std::string& src) {
  AtomicFile f(path_of(key), kCreateDirs);
  copy_file_to_fd(src, f.fd(), f.temp_path());
  f.commit();
}

PutOutcome LocalStore::put_if_absent(const std::string& key, std::string_view bytes) {
  AtomicFile f(path_of(key), kCreateDirs);
  f.write(bytes);
  return f.commit_if_absent() ? PutOutcome::kCreated : PutOutcome::kAlreadyExists;
}

int LocalStore::open_for(const std::string& key, std::string* path) const {
  *path = path_of(key);
  int fd = ::open(path->c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      throw Error(uri() + ": no object '" + key + "'", "list the store with `moerl store ls " + uri() + "`",
                  ErrorCode::kNotFound);
    }
    throw io_error("open", *path, errno, uri());
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error(uri() + ": '" + key + "' is a directory, not an object", "use a key that names a file, or list it",
                ErrorCode::kNotFound);
  }
  return fd;
}

std::string LocalStore::get(const std::string& key) {
  std::string path;
  int fd = open_for(key, &path);
  std::string out;
  try {
    out = read_all(fd, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return out;
}

std::string LocalStore::get_range(const std::string& key, uint64_t offset, uint64_t length) {
  std::string path;
  int fd = open_for(key, &path);
  struct stat st {};
  ::fstat(fd, &st);
  auto size = static_cast<uint64_t>(st.st_size);
  if (offset > size) {
    ::close(fd);
    throw Error(uri() + ": range offset " + std::to_string(offset) + " is past the end of '" + key + "' (" +
                    std::to_string(size) + " bytes)",
                "read at offsets below the object's size (see head())");
  }
  uint64_t n = std::min(length, size - offset);
  std::string out(n, '\0');
  try {
    pread_all(fd, out.data(), n, offset, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return out;
}

void LocalStore::get_file(const std::string& key, const std::string& dest) {
  std::string path;
  ::close(open_for(key, &path));
  AtomicFile f(dest);
  copy_file_to_fd(path, f.fd(), f.temp_path());
  f.commit();
}

static ObjectInfo info_from_stat(const std::string& key, const struct stat& st) {
  ObjectInfo o;
  o.key = key;
  o.size = static_cast<uint64_t>(st.st_size);
  o.mtime_unix = st.st_mtim.tv_sec;
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%llx-%llx-%llx", static_cast<unsigned long long>(st.st_size),
                static_cast<unsigned long long>(st.st_mtim.tv_sec) * 1000000000ull +
                    static_cast<unsigned long long>(st.st_mtim.tv_nsec),
                static_cast<unsigned long long>(st.st_ino));
  o.etag = buf;
  return o;
}

std::optional<ObjectInfo> LocalStore::head(const std::string& key) {
  std::string path = path_of(key);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw io_error("stat", path, errno, uri());
  }
  if (!S_ISREG(st.st_mode)) return std::nullopt;
  return info_from_stat(key, st);
}

void LocalStore::remove(const std::string& key) {
  std::string path = path_of(key);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT && errno != ENOTDIR) throw io_error("remove", path, errno, uri());
  // Prune now-empty parent directories up to the root (rmdir fails harmlessly when not empty).
  fs::path dir = fs::path(path).parent_path();
  while (dir.string().size() > root_.size() && ::rmdir(dir.c_str()) == 0) dir = dir.parent_path();
}

// Walks the directory holding prefix's last '/' and calls fn(key, stat) for each regular file.
template <typename Fn>
static void walk(const std::string& root, const std::string& prefix, Fn fn) {
  std::string dir_part = prefix.substr(0, prefix.rfind('/') == std::string::npos ? 0 : prefix.rfind('/'));
  fs::path start = dir_part.empty() ? fs::path(root) : fs::path(root) / dir_part;
  std::error_code ec;
  if (!fs::is_directory(start, ec)) return;
  std::string base = root == "/" ? "/" : root + "/";
  auto it = fs::recursive_directory_iterator(start, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code ec2;
    if (!it->is_regular_file(ec2)) continue;
    std::string full = it->path().string();
    if (full.compare(0, base.size(), base) != 0) continue;
    std::string key = full.substr(base.size());
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    struct stat st {};
    if (::stat(full.c_str(), &st) != 0) continue;  // removed while walking
    fn(key, it->path().filename().string(), st);
  }
}

std::vector<ObjectInfo> LocalStore::list(const std::string& prefix) {
  validate_prefix(prefix);
  std::vector<ObjectInfo> out;
  walk(root_, prefix, [&](const std::string& key, const std::string& name, const struct stat& st) {
    if (!is_atomic_temp_name(name)) out.push_back(info_from_stat(key, st));
  });
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

std::vector<PendingUpload> LocalStore::list_pending(const std::string& prefix) {
  validate_prefix(prefix);
  std::vector<PendingUpload> out;
  // Temp files are ".NAME.moerl-tmp-..." beside NAME: match the prefix against NAME's key.
  std::string dir_prefix = prefix.substr(0, prefix.rfind('/') == std::string::npos ? 0 : prefix.rfind('/') + 1);
  walk(root_, dir_prefix, [&](const std::string& rel, const std::string& name, const struct stat& st) {
    if (!is_atomic_temp_name(name)) return;
    std::string dir = rel.substr(0, rel.size() - name.size());
    std::string target = dir + atomic_temp_target(name);
    if (target.compare(0, prefix.size(), prefix) != 0) return;
    out.push_back({target, rel, st.st_mtim.tv_sec});
  });
  std::sort(out.begin(), out.end(), [](const PendingUpload& a, const PendingUpload& b) { return a.upload_id < b.upload_id; });
  return out;
}

void LocalStore::abort_pending(const PendingUpload& upload) {
  validate_key(upload.upload_id);
  if (!is_atomic_temp_name(fs::path(upload.upload_id).filename().string())) {
    throw Error(uri() + ": '" + upload.upload_id + "' is not a pending upload (temp file) of this store",
                "pass an entry returned by list_pending()");
  }
  std::string path = path_of(upload.upload_id);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw io_error("remove", path, errno, uri());
}

}  // namespace moerl::store
