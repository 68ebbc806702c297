// Child processes: spawn (fork + exec) with stdio redirected, environment changes, an own
// process group and a parent-death signal; waits that always take a deadline; stop (SIGTERM,
// a grace period, SIGKILL). The one fork/exec/waitpid helper in moerl.
//
//   SpawnOptions o;
//   o.stdout_to = Redirect::file(dir + "/server.log", FileMode::kAppend);
//   o.stderr_to = Redirect::to_stdout();
//   Subprocess p = Subprocess::spawn({"redis-server", "--port", "6399"}, o);
//   if (std::optional<int> code = p.poll()) ...;     // exited already?
//   int code = p.wait(Deadline::after_seconds(30));  // Error(kTimeout) if still running then
//   int code = p.stop(5.0);                          // SIGTERM, up to 5 s, then SIGKILL
//
// Exit statuses are the exit code, or 128 + the signal that ended the child (as a shell
// reports them). A program that cannot be exec'd makes the child print "cannot run 'X':
// why" on its (redirected) stderr and exit 127, as a shell does; fork failure throws
// Error(kIo). Ownership: a Subprocess owns its child until reaped; destroying or
// overwriting one whose child still runs SIGKILLs and reaps it (bounded; logged if the
// child lingers), so no child outlives its owner. Not thread-safe: one owner.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/deadline.h"

namespace moerl {

enum class FileMode { kTruncate, kAppend };

// Where one of the child's standard streams goes.
struct Redirect {
  enum class Kind { kInherit, kDevNull, kFile, kFd, kStdout };
  Kind kind = Kind::kInherit;
  std::string path;                     // kFile: created 0644 if missing
  FileMode mode = FileMode::kTruncate;  // kFile
  int fd = -1;                          // kFd: dup2'ed in the child; the caller keeps fd

  static Redirect inherit() { return {}; }
  static Redirect dev_null() { return {Kind::kDevNull, "", FileMode::kTruncate, -1}; }
  static Redirect file(std::string path, FileMode mode) { return {Kind::kFile, std::move(path), mode, -1}; }
  static Redirect to_fd(int fd) { return {Kind::kFd, "", FileMode::kTruncate, fd}; }
  static Redirect to_stdout() { return {Kind::kStdout, "", FileMode::kTruncate, -1}; }  // stderr only: 2>&1
};

enum class ProcessGroup { kInherit, kNew };

struct SpawnOptions {
  Redirect stdin_from;
  Redirect stdout_to;
  Redirect stderr_to;
  std::vector<std::pair<std::string, std::string>> set_env;      // NAME, VALUE: set, replacing
  std::vector<std::pair<std::string, std::string>> default_env;  // NAME, VALUE: set only if unset
  std::vector<std::string> unset_env;
  // kNew: the child leads a new group (setpgid), so signals sent to this process's group
  // do not reach it, and signal() reaches the child's own children too.
  ProcessGroup group = ProcessGroup::kInherit;
  // PR_SET_PDEATHSIG: the signal the child gets when the spawning THREAD exits; 0 for none.
  // NOTE: it follows the thread, so spawn long-lived children from a long-lived thread.
  int parent_death_signal = 0;
};

class Subprocess {
 public:
  // argv[0] is looked up on PATH. Throws Error(kInvalidInput) for an empty argv, Error(kIo)
  // when a redirect file cannot be opened or fork fails.
  static Subprocess spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {});
  // Takes over a child this process forked itself (e.g. one that runs test code without exec).
  static Subprocess adopt(pid_t pid, std::string name);

  Subprocess() = default;  // empty: no child
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  ~Subprocess();

  pid_t pid() const { return pid_; }  // -1 when empty
  const std::string& name() const { return name_; }
  // The exit status once reaped, without waiting.
  std::optional<int> exit_status() const { return status_; }
  // True when the reaped child was ended by a signal (its status is then 128 + signal).
  bool killed_by_signal() const { return signaled_; }

  // Reaps the child if it has exited; its exit status then, nullopt while it runs.
  std::optional<int> poll();
  bool running() { return pid_ > 0 && !poll(); }
  // Waits for the exit; nullopt if it still runs at the deadline (it keeps running).
  std::optional<int> wait_for(const Deadline& deadline);
  // As wait_for, but a child still running at the deadline is Error(kTimeout) naming it.
  int wait(const Deadline& deadline);
  // As wait_for, but a child still running at the deadline is SIGKILLed and reaped; the
  // result is then nullopt (its status, 128 + SIGKILL, is in exit_status()).
  std::optional<int> wait_or_kill(const Deadline& deadline);
  // Sends sig to the child (and, with ProcessGroup::kNew, its group). False when the child
  // is already reaped or kill(2) fails.
  bool signal(int sig);
  // SIGTERM, then up to grace_seconds for the exit, then SIGKILL; returns the exit status.
  int stop(double grace_seconds);
  // SIGKILL and reap; returns the exit status. Error(kTimeout) if the child does not go
  // within 10 s (stuck in the kernel).
  int kill();

 private:
  Subprocess(pid_t pid, std::string name, ProcessGroup group) : pid_(pid), name_(std::move(name)), group_(group) {}
  void kill_and_forget() noexcept;  // for the destructor and move-assignment

  pid_t pid_ = -1;
  std::string name_;  // argv[0], for messages
  ProcessGroup group_ = ProcessGroup::kInherit;
  std::optional<int> status_;  // set once reaped
  bool signaled_ = false;
};

// What run_captured saw: the exit status (128 + signal when killed) and stdout and stderr
// interleaved as written.
struct CapturedRun {
  int status = -1;
  bool timed_out = false;  // still running at the deadline, then killed
  std::string output;
};

// Runs argv to its end with stdout and stderr captured together (through a temp file, so a
// chatty child never blocks on a full pipe); a child still running at the deadline is
// SIGKILLed. `options` may set env and the group; its redirects of stdout/stderr are replaced.
CapturedRun run_captured(const std::vector<std::string>& argv, const Deadline& deadline, SpawnOptions options = {});

}  // namespace moerl
