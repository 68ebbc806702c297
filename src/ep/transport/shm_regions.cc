// Lock files beside the shm provider's regions, and the sweep of regions nobody holds.
#include "ep/transport/shm_regions.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/error.h"

namespace moerl::ep {
namespace {

constexpr char kPrefix[] = "moerl-";
constexpr char kLock[] = ".lock";
constexpr char kHalfMade[] = ".lock-new";

// True when nobody holds `path`'s lock (and we now do, until fd is closed).
bool take_if_free(const std::string& path, int* fd) {
  *fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (*fd < 0) return false;
  if (::flock(*fd, LOCK_EX | LOCK_NB) == 0) return true;
  ::close(*fd);
  *fd = -1;
  return false;
}

}  // namespace

ShmRegionLock::ShmRegionLock(const std::string& dir, const std::string& name) : path_(dir + "/" + name + kLock) {
  const std::string tmp = dir + "/" + name + kHalfMade;
  fd_ = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0 || ::rename(tmp.c_str(), path_.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    if (fd_ >= 0) ::close(fd_), ::unlink(tmp.c_str());
    throw Error("ep fabric: cannot make the shm region lock " + path_ + ": " + why,
                "the shm provider needs a writable " + dir + " (a container needs /dev/shm mounted)", ErrorCode::kIo);
  }
}

ShmRegionLock::~ShmRegionLock() {
  ::unlink(path_.c_str());
  ::close(fd_);
}

int sweep_stale_regions(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    const bool lock = name.ends_with(kLock), half = name.ends_with(kHalfMade);
    if (!lock && !half) continue;
    const std::string path = dir + "/" + name;
    // A half-made lock may be a live process's between its open and its flock: only old ones.
    if (half) {
      std::error_code stat_ec;
      const auto written = std::filesystem::last_write_time(path, stat_ec);
      if (stat_ec || std::filesystem::file_time_type::clock::now() - written < std::chrono::seconds(60)) continue;
    }
    int fd = -1;
    if (!take_if_free(path, &fd)) continue;  // its owner lives (or it is gone already)
    if (lock) {
      const std::string region = path.substr(0, path.size() - std::strlen(kLock));
      if (::unlink(region.c_str()) == 0) ++removed;
    }
    ::unlink(path.c_str());
    ::close(fd);
  }
  return removed;
}

}  // namespace moerl::ep
