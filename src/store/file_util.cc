// POSIX helpers for the store backends.
#include "store/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace moerl::store {

Error io_error(const std::string& what, const std::string& path, int err, const std::string& store_uri) {
  std::string hint = err == ENOSPC ? "free disk space" : err == EACCES || err == EPERM ? "check permissions on the path" : "check the path and the disk";
  return Error(store_uri + ": " + what + " '" + path + "' failed: " + std::strerror(err), hint, ErrorCode::kIo);
}

void write_all(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw io_error("write", path, errno, "local");
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void pwrite_all(int fd, const char* data, size_t size, uint64_t offset, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::pwrite(fd, data, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw io_error("write", path, errno, "local");
    data += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

void pread_all(int fd, char* data, size_t size, uint64_t offset, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::pread(fd, data, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw io_error("read", path, errno, "local");
    if (n == 0) throw Error("'" + path + "' is shorter than expected (changed while reading?)", "retry", ErrorCode::kIo);
    data += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

std::string read_all(int fd, const std::string& path) {
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw io_error("read", path, errno, "local");
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

void copy_file_to_fd(const std::string& src, int fd, const std::string& fd_path) {
  int in = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    if (errno == ENOENT) {
      throw Error("no file '" + src + "'", "check the source path", ErrorCode::kNotFound);
    }
    throw io_error("open", src, errno, "local");
  }
  std::vector<char> buf(1 << 20);
  while (true) {
    ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(in);
      throw io_error("read", src, e, "local");
    }
    if (n == 0) break;
    try {
      write_all(fd, buf.data(), static_cast<size_t>(n), fd_path);
    } catch (...) {
      ::close(in);
      throw;
    }
  }
  ::close(in);
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // NOTE: best effort; the rename itself already happened
  ::fsync(fd);
  ::close(fd);
}

uint64_t file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) throw Error("no file '" + path + "'", "check the source path", ErrorCode::kNotFound);
    throw io_error("stat", path, errno, "local");
  }
  if (!S_ISREG(st.st_mode)) throw Error("'" + path + "' is not a regular file", "give a file path (use -r for directories)");
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace moerl::store
