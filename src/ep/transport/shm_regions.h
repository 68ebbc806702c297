// Region files of libfabric's shm provider that killed processes leave behind. A SIGKILLed
// rank never closes its endpoint, so its region (tens of MB of a memory-backed /dev/shm)
// stays; a restarted container of the same pod shares that /dev/shm and would fill it.
// Each endpoint holds an flock on "<region>.lock" for its life, taken before the region
// exists; the kernel drops a dead process's locks, in whatever pid namespace it ran. An
// endpoint being made first removes every "moerl-" region whose lock nobody holds.
//
//   sweep_stale_regions("/dev/shm");                  // before making a region
//   ShmRegionLock lock("/dev/shm", "moerl-123-ab12");  // held while the region lives
//
// Regions of moerl builds before this (no lock file) are left alone: their owners' liveness
// cannot be told across pid namespaces.
#pragma once

#include <string>

namespace moerl::ep {

class ShmRegionLock {
 public:
  // Creates "<dir>/<name>.lock" (under a temporary name first, locked, then renamed, so no
  // sweep ever sees it unlocked) and holds it. Throws moerl::Error naming the path.
  ShmRegionLock(const std::string& dir, const std::string& name);
  ~ShmRegionLock();  // removes the lock file, then releases it
  ShmRegionLock(const ShmRegionLock&) = delete;
  ShmRegionLock& operator=(const ShmRegionLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

// Removes each "<dir>/moerl-*" region whose "<region>.lock" no live process holds, with the
// lock, and lock files left half-made by killed processes. Returns how many regions it removed.
// Never throws: what cannot be read or removed is skipped.
int sweep_stale_regions(const std::string& dir);

}  // namespace moerl::ep
