// AtomicFile writes a temp file opened O_EXCL beside its target and renames (or links) it
// into place; remove_tree walks with opendir/readdir and removes with unlink/rmdir (lstat, so
// links are removed rather than followed); ScratchDir makes its directory with mkdtemp.
#include "base/files.h"


#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "base/check.h"
#include "base/error.h"
#include "base/log.h"

namespace moerl {
namespace {

constexpr const char* kTempTag = ".moerl-tmp-";

Error io_error(const std::string& what, const std::string& path, int err) {
  return Error("cannot " + what + " '" + path + "': " + std::strerror(err),
               "check permissions on that path and that no other process holds it", ErrorCode::kIo);
}

Error write_error(const std::string& what, const std::string& path, int err) {
  const char* hint = err == ENOSPC || err == EDQUOT ? "free disk space (or raise the quota) and retry"
                     : err == ENOENT                ? "create the output directory first, or check the path"
                     : err == EACCES || err == EPERM || err == EROFS
                         ? "check that the directory is writable by this user"
                         : "check the path and the disk";
  return Error("cannot " + what + " '" + path + "': " + std::strerror(err), hint, ErrorCode::kIo);
}

// "dir/name" -> {"dir", "name"}; "name" -> {"", "name"}; "/name" -> {"/", "name"}.
std::pair<std::string, std::string> split_path(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return {"", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

std::string temp_path_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  auto [dir, name] = split_path(path);
  std::string tmp = "." + name + kTempTag + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
                    std::to_string(rng() % 1000000);
  return dir.empty() ? tmp : dir == "/" ? "/" + tmp : dir + "/" + tmp;
}

// mkdir -p; an existing directory is fine. Errors surface at the open that follows.
void make_dirs(const std::string& dir) {
  if (dir.empty() || dir == "/") return;
  if (::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) return;
  if (errno != ENOENT) return;
  make_dirs(split_path(dir).first);
  ::mkdir(dir.c_str(), 0755);
}

void fsync_dir_of(const std::string& path) {
  std::string dir = split_path(path).first;
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // NOTE: best effort; the rename itself already happened
  ::fsync(fd);         // NOTE: some file systems refuse fsync on directories
  ::close(fd);
}

void remove_entry(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw io_error("stat", path, errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw io_error("remove", path, errno);
    return;
  }
  std::vector<std::string> children;
  if (DIR* d = ::opendir(path.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) children.push_back(e->d_name);
    }
    ::closedir(d);
  } else if (errno != ENOENT) {
    throw io_error("list", path, errno);
  }
  for (const std::string& c : children) remove_entry(path + "/" + c);
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) throw io_error("remove directory", path, errno);
}

}  // namespace

AtomicFile::AtomicFile(std::string path, AtomicFileOptions options) : path_(std::move(path)) {
  if (path_.empty() || path_.back() == '/') {
    throw Error("cannot write '" + path_ + "': not a file path", "name the file to write", ErrorCode::kInvalidInput);
  }
  temp_path_ = temp_path_for(path_);
  // NOTE: a concurrent remover may prune the parent directory between mkdir and open; retry.
  for (int attempt = 0; attempt < 5 && fd_ < 0; ++attempt) {
    if (options.parent_dirs == ParentDirs::kCreate) make_dirs(split_path(path_).first);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, options.mode);
    if (fd_ < 0 && (errno != ENOENT || options.parent_dirs == ParentDirs::kMustExist)) break;
  }
  if (fd_ < 0) throw write_error("create a temp file for", path_, errno);
}

AtomicFile::~AtomicFile() {
  if (done_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(temp_path_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  MOERL_CHECK(!done_) << "AtomicFile::write after commit: " << path_;
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw write_error("write", temp_path_, n == 0 ? EIO : errno);  // 0: would spin
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::finish_temp() {
  MOERL_CHECK(!done_) << "AtomicFile committed twice: " << path_;
  int err = ::fsync(fd_) != 0 ? errno : 0;
  const char* what = "fsync";
  if (::close(fd_) != 0 && err == 0) {
    err = errno;
    what = "close";
  }
  fd_ = -1;
  if (err != 0) {
    ::unlink(temp_path_.c_str());
    done_ = true;
    throw write_error(what, temp_path_, err);
  }
}

void AtomicFile::commit() {
  finish_temp();
  done_ = true;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(temp_path_.c_str());
    throw write_error("rename '" + temp_path_ + "' over", path_, err);
  }
  fsync_dir_of(path_);
}

bool AtomicFile::commit_if_absent() {
  finish_temp();
  done_ = true;
  int rc = ::link(temp_path_.c_str(), path_.c_str());
  int err = errno;
  ::unlink(temp_path_.c_str());
  if (rc != 0) {
    if (err == EEXIST) return false;
    throw write_error("link '" + temp_path_ + "' to", path_, err);
  }
  fsync_dir_of(path_);
  return true;
}

void write_file_atomic(const std::string& path, std::string_view bytes, AtomicFileOptions options) {
  AtomicFile f(path, options);
  f.write(bytes);
  f.commit();
}

bool is_atomic_temp_name(const std::string& filename) {
  return !filename.empty() && filename[0] == '.' && filename.find(kTempTag) != std::string::npos;
}

std::string atomic_temp_target(const std::string& filename) {
  if (!is_atomic_temp_name(filename)) return "";
  return filename.substr(1, filename.find(kTempTag) - 1);
}

void remove_tree(const std::string& path) {
  if (path.empty()) throw Error("remove_tree: empty path", "pass the directory to remove", ErrorCode::kInternal);
  remove_entry(path);
}

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string tmpl = std::filesystem::temp_directory_path().string() + "/" + prefix + "-" + std::to_string(::getpid()) + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) throw io_error("create scratch directory", tmpl, errno);
  path_ = buf.data();
}

ScratchDir::~ScratchDir() {
  try {
    remove_tree(path_);
  } catch (const std::exception& e) {
    MOERL_LOG(WARN) << "scratch directory left behind: " << e.what();
  }
}

}  // namespace moerl
