// Directory helpers on plain POSIX calls: recursive removal and a self-removing scratch
// directory. std::filesystem::remove_all is not used: in the GPU image (a GCC 13.3 build
// against that image's libstdc++) it jumped to address 0 (docs/perf.md, GPU RL run).
//
//   moerl::remove_tree("/tmp/run");                 // absent is fine; throws kIo otherwise
//   { moerl::ScratchDir tmp("moerl-ckpt");  write(tmp.path() + "/x"); }   // removed here
//
// Stateless apart from ScratchDir's own directory; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace moerl {

// Writes `bytes` to `path` through a temporary file and a rename: readers see the old or the
// new content, never half. Throws moerl::Error (kIo) naming the path.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Removes path and everything below it; symlinks are removed, never followed. A missing
// path is not an error. Throws moerl::Error (kIo) naming the entry that could not go.
void remove_tree(const std::string& path);

// A fresh directory under the temporary directory ($TMPDIR, else /tmp) named PREFIX-<pid>-<n>, removed with its
// contents when the guard is destroyed (errors there are logged, not thrown).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace moerl
