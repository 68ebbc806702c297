// Subprocess: everything the child needs (argv, envp, opened redirect files, the exec error
// text) is built before fork, so the child only makes async-signal-safe calls (setpgid,
// prctl, sigprocmask, dup2, execvpe, write, _exit). Waits poll waitpid(WNOHANG) with a short
// backoff until their deadline.
#include "base/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "base/check.h"
#include "base/error.h"
#include "base/log.h"

extern char** environ;

namespace moerl {
namespace {

constexpr double kKillReapSeconds = 10;

int decode_status(int status, bool* signaled) {
  *signaled = WIFSIGNALED(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string env_name(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// The child's environment: ours, minus unset_env, with set_env replacing and default_env
// filling in. Empty when nothing changes (the child then inherits `environ` as is).
std::vector<std::string> child_env(const SpawnOptions& o) {
  if (o.set_env.empty() && o.default_env.empty() && o.unset_env.empty()) return {};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  auto named = [](const std::string& name) { return [&name](const std::string& e) { return env_name(e) == name; }; };
  for (const std::string& name : o.unset_env) std::erase_if(env, named(name));
  for (const auto& [name, value] : o.set_env) {
    std::erase_if(env, named(name));  // NOTE: a later entry for the same name wins
    env.push_back(name + "=" + value);
  }
  for (const auto& [name, value] : o.default_env) {
    if (std::none_of(env.begin(), env.end(), named(name))) env.push_back(name + "=" + value);
  }
  return env;
}

// Opens a redirect's source in the parent (O_CLOEXEC: only the dup2 copy reaches the child).
// Returns the fd to dup2, -1 to leave the stream alone; *owned says whether to close it after.
int open_source(const Redirect& r, int stream, bool* owned) {
  *owned = false;
  switch (r.kind) {
    case Redirect::Kind::kInherit:
      return -1;
    case Redirect::Kind::kFd:
      return r.fd;
    case Redirect::Kind::kStdout:
      MOERL_CHECK(stream == 2) << "Redirect::to_stdout() is for stderr only";
      return 1;
    case Redirect::Kind::kDevNull:
    case Redirect::Kind::kFile: {
      const std::string path = r.kind == Redirect::Kind::kDevNull ? "/dev/null" : r.path;
      int flags = stream == 0 ? O_RDONLY : O_WRONLY | O_CREAT | (r.mode == FileMode::kAppend ? O_APPEND : O_TRUNC);
      int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
      if (fd < 0) {
        throw Error("cannot open '" + path + "' for a child's " + (stream == 0 ? "stdin" : stream == 1 ? "stdout" : "stderr") +
                        ": " + std::strerror(errno),
                    "check that the directory exists and is writable", ErrorCode::kIo);
      }
      *owned = true;
      return fd;
    }
  }
  return -1;
}

// In the child: puts `fd` on `stream`. dup2 onto itself would keep O_CLOEXEC, so clear it.
void child_redirect(int fd, int stream) {
  if (fd < 0) return;
  if (fd == stream) {
    ::fcntl(fd, F_SETFD, 0);
  } else if (::dup2(fd, stream) < 0) {
    ::_exit(127);
  }
}

// In the child: no allocation (malloc may hold a lock some other parent thread took).
void child_write(const char* s) { [[maybe_unused]] ssize_t n = ::write(2, s, std::strlen(s)); }

}  // namespace

Subprocess Subprocess::spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty() || argv[0].empty()) {
    throw Error("spawn: empty command line", "pass the program as argv[0]", ErrorCode::kInvalidInput);
  }
  std::vector<char*> c_argv;
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  std::vector<std::string> env = child_env(options);
  std::vector<char*> c_env;
  for (std::string& e : env) c_env.push_back(e.data());
  c_env.push_back(nullptr);
  char** envp = env.empty() ? environ : c_env.data();
  const std::string exec_error = "cannot run '" + argv[0] + "': ";

  int fds[3];
  bool owned[3] = {false, false, false};
  auto close_owned = [&] {
    for (int s = 0; s < 3; ++s) {
      if (owned[s]) ::close(fds[s]);
    }
  };
  try {
    fds[0] = open_source(options.stdin_from, 0, &owned[0]);
    fds[1] = open_source(options.stdout_to, 1, &owned[1]);
    fds[2] = open_source(options.stderr_to, 2, &owned[2]);
  } catch (...) {
    close_owned();
    throw;
  }
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    if (options.group == ProcessGroup::kNew) ::setpgid(0, 0);
    if (options.parent_death_signal != 0) {
      ::prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // NOTE: a blocked SIGTERM must not carry over
    for (int s = 0; s < 3; ++s) child_redirect(fds[s], s);
    ::execvpe(c_argv[0], c_argv.data(), envp);
    const char* why = std::strerror(errno);
    child_write(exec_error.c_str());
    child_write(why);
    child_write("\n");
    ::_exit(127);
  }
  int fork_errno = errno;
  close_owned();
  if (pid < 0) {
    throw Error("cannot start '" + argv[0] + "': fork failed: " + std::strerror(fork_errno),
                "the process or memory limit may be reached; check `ulimit -u` and free memory", ErrorCode::kIo);
  }
  return Subprocess(pid, argv[0], options.group);
}

Subprocess Subprocess::adopt(pid_t pid, std::string name) {
  MOERL_CHECK(pid > 0) << "adopt(" << pid << ", " << name << ")";
  return Subprocess(pid, std::move(name), ProcessGroup::kInherit);
}

Subprocess::Subprocess(Subprocess&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)), name_(std::move(o.name_)), group_(o.group_),
      status_(std::exchange(o.status_, std::nullopt)), signaled_(o.signaled_) {}

Subprocess& Subprocess::operator=(Subprocess&& o) noexcept {
  if (this != &o) {
    kill_and_forget();
    pid_ = std::exchange(o.pid_, -1);
    name_ = std::move(o.name_);
    group_ = o.group_;
    status_ = std::exchange(o.status_, std::nullopt);
    signaled_ = o.signaled_;
  }
  return *this;
}

Subprocess::~Subprocess() { kill_and_forget(); }

void Subprocess::kill_and_forget() noexcept {
  if (pid_ <= 0 || status_) return;
  try {
    kill();
  } catch (const std::exception& e) {
    MOERL_LOG(WARN) << "child left behind: " << e.what();
  }
}

std::optional<int> Subprocess::poll() {
  MOERL_CHECK(pid_ > 0) << "poll() on an empty Subprocess";
  if (status_) return status_;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r < 0) {
    throw Error("waitpid(" + std::to_string(pid_) + ", '" + name_ + "'): " + std::strerror(errno),
                "the child was reaped elsewhere (a SIGCHLD handler?); let its Subprocess reap it",
                ErrorCode::kInternal);
  }
  if (r == 0) return std::nullopt;
  status_ = decode_status(status, &signaled_);
  return status_;
}

std::optional<int> Subprocess::wait_for(const Deadline& deadline) {
  auto pause = std::chrono::microseconds(500);
  while (true) {
    if (std::optional<int> s = poll()) return s;
    if (deadline.expired()) return std::nullopt;
    std::this_thread::sleep_for(std::min(pause, std::chrono::duration_cast<std::chrono::microseconds>(
                                                    deadline.at() - Deadline::Clock::now())));
    pause = std::min(pause * 2, std::chrono::microseconds(10000));
  }
}

int Subprocess::wait(const Deadline& deadline) {
  if (std::optional<int> s = wait_for(deadline)) return *s;
  throw Error("'" + name_ + "' (pid " + std::to_string(pid_) + ") was still running at the deadline",
              "allow it longer, or look at its log for why it hangs", ErrorCode::kTimeout);
}

std::optional<int> Subprocess::wait_or_kill(const Deadline& deadline) {
  if (std::optional<int> s = wait_for(deadline)) return s;
  kill();
  return std::nullopt;
}

bool Subprocess::signal(int sig) {
  if (pid_ <= 0 || status_) return false;
  // NOTE: the group first; the child alone if it has left (or never led) its group.
  if (group_ == ProcessGroup::kNew && ::kill(-pid_, sig) == 0) return true;
  return ::kill(pid_, sig) == 0;
}

int Subprocess::stop(double grace_seconds) {
  MOERL_CHECK(pid_ > 0) << "stop() on an empty Subprocess";
  signal(SIGTERM);
  if (std::optional<int> s = wait_for(Deadline::after_seconds(grace_seconds))) return *s;
  return kill();
}

int Subprocess::kill() {
  MOERL_CHECK(pid_ > 0) << "kill() on an empty Subprocess";
  signal(SIGKILL);
  if (std::optional<int> s = wait_for(Deadline::after_seconds(kKillReapSeconds))) return *s;
  throw Error("'" + name_ + "' (pid " + std::to_string(pid_) + ") survived SIGKILL for " +
                  std::to_string(static_cast<int>(kKillReapSeconds)) + " s",
              "it is stuck in the kernel (D state: a hung mount or device); see `ps -o stat,wchan -p " +
                  std::to_string(pid_) + "`",
              ErrorCode::kTimeout);
}

CapturedRun run_captured(const std::vector<std::string>& argv, const Deadline& deadline, SpawnOptions options) {
  char path[] = "/tmp/moerl-capture-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) {
    throw Error(std::string("run_captured: cannot create a temp file: ") + std::strerror(errno),
                "check that /tmp is writable", ErrorCode::kIo);
  }
  ::unlink(path);  // the open descriptor keeps the file until it is closed
  options.stdout_to = Redirect::to_fd(fd);
  options.stderr_to = Redirect::to_stdout();
  CapturedRun r;
  try {
    Subprocess p = Subprocess::spawn(argv, options);
    r.timed_out = !p.wait_or_kill(deadline).has_value();
    r.status = p.exit_status().value_or(-1);
  } catch (...) {
    ::close(fd);
    throw;
  }
  char buf[4096];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n <= 0) break;
    r.output.append(buf, static_cast<size_t>(n));
    at += n;
  }
  ::close(fd);
  return r;
}

}  // namespace moerl
