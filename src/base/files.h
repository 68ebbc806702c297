// File helpers on plain POSIX calls: all-or-nothing writes (temp file, fsync, rename),
// recursive removal and a self-removing scratch directory. std::filesystem::remove_all is
// not used: in the GPU image (a GCC 13.3 build against that image's libstdc++) it jumped to
// address 0 (docs/perf.md, GPU RL run).
//
//   moerl::write_file_atomic("run/summary.json", text);    // readers see old or new, never half
//   { moerl::AtomicFile f("w.bin");  f.write(header);  f.write(body);  f.commit(); }
//   moerl::remove_tree("/tmp/run");                 // absent is fine; throws kIo otherwise
//   { moerl::ScratchDir tmp("moerl-ckpt");  write(tmp.path() + "/x"); }   // removed here
//
// Failures throw moerl::Error (kIo) naming the path, with a hint. Stateless apart from each
// object's own file or directory; distinct objects may be used from different threads.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

namespace moerl {

// What AtomicFile does when the target's directory is missing.
enum class ParentDirs { kMustExist, kCreate };

struct AtomicFileOptions {
  mode_t mode = 0644;  // permissions of the new file (the umask still applies)
  ParentDirs parent_dirs = ParentDirs::kMustExist;
};

// Writes `path` all or nothing. Bytes go to a hidden temp file beside it,
// ".NAME.moerl-tmp-<pid>-<n>-<r>" (is_atomic_temp_name), which commit() fsyncs, renames over
// `path` and follows with an fsync of the directory. Not committed (an exception, an early
// return): the destructor removes the temp file and `path` keeps what it held. One owner.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path, AtomicFileOptions options = {});
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  // The open temp file, for pwrite or a copy into it; owned (and closed) by this object.
  int fd() const { return fd_; }
  void write(const void* data, size_t size);  // appends all of it (retries short writes, EINTR)
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // Makes the content durable under `path`, replacing any old file.
  void commit();
  // As commit(), but with link(2): creates `path` only if absent. False (temp removed, `path`
  // untouched) when it already exists.
  bool commit_if_absent();

 private:
  void finish_temp();  // fsync + close, removing the temp file on failure

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool done_ = false;  // committed, or given up: nothing left for the destructor
};

// One-shot AtomicFile: `path` holds exactly `bytes` afterwards, or (on an Error) what it held.
void write_file_atomic(const std::string& path, std::string_view bytes, AtomicFileOptions options = {});

// True for a file name (no directory) that AtomicFile uses for its temp files: what a writer
// that died mid-write leaves behind.
bool is_atomic_temp_name(const std::string& filename);
// The name such a temp file was to become: ".NAME.moerl-tmp-..." -> "NAME" ("" if not one).
std::string atomic_temp_target(const std::string& filename);

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
