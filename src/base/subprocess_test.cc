// Subprocess: exit codes and signals as statuses, deadlines on every wait, stop's SIGTERM ->
// SIGKILL escalation, redirects, environment changes, exec failure as 127, and that the
// destructor leaves no child behind.
#include "base/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "base/error.h"
#include "base/files.h"

namespace moerl {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

Deadline soon() { return Deadline::after_seconds(20); }

TEST(Subprocess, ExitCodes) {
  Subprocess ok = Subprocess::spawn({"/bin/true"});
  EXPECT_GT(ok.pid(), 0);
  EXPECT_EQ(ok.wait(soon()), 0);
  EXPECT_EQ(ok.exit_status(), 0);
  EXPECT_FALSE(ok.running());

  Subprocess three = Subprocess::spawn({"/bin/sh", "-c", "exit 3"});
  EXPECT_EQ(three.wait(soon()), 3);
  EXPECT_FALSE(three.killed_by_signal());
  EXPECT_EQ(three.poll(), 3);  // reaped once; the status stays

  Subprocess missing = Subprocess::spawn({"moerl-no-such-program-xyz"}, {.stderr_to = Redirect::dev_null()});
  EXPECT_EQ(missing.wait(soon()), 127);
}

TEST(Subprocess, WaitHonoursItsDeadline) {
  Subprocess sleeper = Subprocess::spawn({"sleep", "30"});
  double t0 = now_seconds();
  EXPECT_EQ(sleeper.wait_for(Deadline::after_seconds(0.2)), std::nullopt);
  double waited = now_seconds() - t0;
  EXPECT_GE(waited, 0.2);
  EXPECT_LT(waited, 5.0);
  EXPECT_TRUE(sleeper.running());
  try {
    sleeper.wait(Deadline::after_seconds(0.05));
    ADD_FAILURE() << "expected a timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(e.message().find("'sleep' (pid " + std::to_string(sleeper.pid()) + ")"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sleeper.kill(), 128 + SIGKILL);
  EXPECT_TRUE(sleeper.killed_by_signal());
  EXPECT_FALSE(alive(sleeper.pid()));

  Subprocess hung = Subprocess::spawn({"sleep", "30"});
  EXPECT_EQ(hung.wait_or_kill(Deadline::after_seconds(0.1)), std::nullopt);
  EXPECT_EQ(hung.exit_status(), 128 + SIGKILL);
  Subprocess quick = Subprocess::spawn({"/bin/sh", "-c", "exit 5"});
  EXPECT_EQ(quick.wait_or_kill(soon()), 5);
}

TEST(Subprocess, StopEscalatesFromSigtermToSigkill) {
  Subprocess polite = Subprocess::spawn({"sleep", "30"});
  EXPECT_EQ(polite.stop(5.0), 128 + SIGTERM);

  ScratchDir dir("moerl-subprocess-test");
  const std::string ready = dir.path() + "/ready";
  // Ignores SIGTERM (and says so once the trap is set): only SIGKILL ends it.
  Subprocess stubborn =
      Subprocess::spawn({"/bin/sh", "-c", "trap '' TERM; touch " + ready + "; while :; do sleep 0.05; done"});
  Deadline d = soon();
  while (::access(ready.c_str(), F_OK) != 0 && !d.expired()) usleep(10000);
  double t0 = now_seconds();
  EXPECT_EQ(stubborn.stop(0.3), 128 + SIGKILL);
  EXPECT_GE(now_seconds() - t0, 0.3);
}

TEST(Subprocess, RedirectsAndEnvironment) {
  ScratchDir dir("moerl-subprocess-test");
  const std::string log = dir.path() + "/out.log";
  ::setenv("MOERL_SUBPROCESS_TEST_KEEP", "parent", 1);
  ::setenv("MOERL_SUBPROCESS_TEST_GONE", "parent", 1);
  SpawnOptions o;
  o.stdout_to = Redirect::file(log, FileMode::kTruncate);
  o.stderr_to = Redirect::to_stdout();
  o.set_env = {{"MOERL_SUBPROCESS_TEST_SET", "child"}};
  o.default_env = {{"MOERL_SUBPROCESS_TEST_KEEP", "default"}, {"MOERL_SUBPROCESS_TEST_NEW", "default"}};
  o.unset_env = {"MOERL_SUBPROCESS_TEST_GONE"};
  const std::string script =
      "echo out; echo err >&2; echo \"$MOERL_SUBPROCESS_TEST_SET $MOERL_SUBPROCESS_TEST_KEEP "
      "$MOERL_SUBPROCESS_TEST_NEW [${MOERL_SUBPROCESS_TEST_GONE-unset}]\"";
  EXPECT_EQ(Subprocess::spawn({"/bin/sh", "-c", script}, o).wait(soon()), 0);
  EXPECT_EQ(slurp(log), "out\nerr\nchild parent default [unset]\n");

  o.stdout_to = Redirect::file(log, FileMode::kAppend);
  o.stderr_to = Redirect::dev_null();
  EXPECT_EQ(Subprocess::spawn({"/bin/sh", "-c", "echo more; echo hidden >&2"}, o).wait(soon()), 0);
  EXPECT_EQ(slurp(log), "out\nerr\nchild parent default [unset]\nmore\n");

  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  Subprocess cat = Subprocess::spawn({"cat"}, {.stdin_from = Redirect::to_fd(p[0]), .stdout_to = Redirect::file(log, FileMode::kTruncate)});
  ::close(p[0]);
  ASSERT_EQ(::write(p[1], "piped\n", 6), 6);
  ::close(p[1]);  // cat sees EOF
  EXPECT_EQ(cat.wait(soon()), 0);
  EXPECT_EQ(slurp(log), "piped\n");
  ::unsetenv("MOERL_SUBPROCESS_TEST_KEEP");
  ::unsetenv("MOERL_SUBPROCESS_TEST_GONE");

  try {
    Subprocess::spawn({"/bin/true"}, {.stdout_to = Redirect::file(dir.path() + "/no/such/dir/x", FileMode::kAppend)});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(e.message().find(dir.path() + "/no/such/dir/x"), std::string::npos) << e.what();
  }
}

TEST(Subprocess, NewGroupSignalReachesGrandchildren) {
  ScratchDir dir("moerl-subprocess-test");
  const std::string pidfile = dir.path() + "/grandchild";
  Subprocess parent = Subprocess::spawn(
      {"/bin/sh", "-c", "sleep 30 & echo $! > " + pidfile + "; wait"}, {.group = ProcessGroup::kNew});
  Deadline d = soon();
  while (slurp(pidfile).empty() && !d.expired()) usleep(10000);
  pid_t grandchild = static_cast<pid_t>(std::stol(slurp(pidfile)));
  EXPECT_EQ(::getpgid(parent.pid()), parent.pid());
  EXPECT_EQ(::getpgid(grandchild), parent.pid());
  EXPECT_EQ(parent.stop(5.0), 128 + SIGTERM);
  Deadline gone = Deadline::after_seconds(5);
  while (alive(grandchild) && !gone.expired()) usleep(10000);
  EXPECT_FALSE(alive(grandchild)) << "SIGTERM to the group must reach the grandchild";
}

TEST(Subprocess, DestructorKillsAndReaps) {
  pid_t pid;
  {
    Subprocess sleeper = Subprocess::spawn({"sleep", "30"});
    pid = sleeper.pid();
    Subprocess moved = std::move(sleeper);
    EXPECT_EQ(sleeper.pid(), -1);
    EXPECT_EQ(moved.pid(), pid);
  }
  EXPECT_FALSE(alive(pid)) << "the destructor must SIGKILL and reap (no zombie either)";
}

TEST(Subprocess, AdoptsAForkedChild) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(7);
  Subprocess child = Subprocess::adopt(pid, "forked");
  EXPECT_EQ(child.wait(soon()), 7);
  EXPECT_EQ(child.name(), "forked");
}

TEST(Subprocess, RunCapturedCollectsBothStreamsAndTheStatus) {
  CapturedRun r = run_captured({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, Deadline::after_seconds(10));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.output, "out\nerr\n");
  CapturedRun slow = run_captured({"/bin/sleep", "30"}, Deadline::after_seconds(0.2));
  EXPECT_TRUE(slow.timed_out);
  EXPECT_EQ(slow.status, 128 + SIGKILL);
}

}  // namespace
}  // namespace moerl
