// `moerl launch -n N [--] CMD ...` / `moerl launch --nproc-per-node G [--nnodes N --node-rank K
// --master-addr A --master-port P] -- CMD ...`: starts this node's ranks of CMD (torchrun-like;
// cli/launch_topology.h resolves the shape, defaults from the operator's env) with RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR/PORT; prefixes each output
// line with "[rank i] " (global rank), forwards SIGINT/SIGTERM (then exits with the ranks'
// status), and when one rank fails stops the others and exits with that rank's status. Ranks
// die with the launcher (SIGKILL on its death). CMD "moerl" runs this very binary.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/env.h"
#include "base/error.h"
#include "base/subprocess.h"
#include "cli/command.h"
#include "cli/launch_topology.h"

namespace moerl::cli {
namespace {

volatile std::sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    throw Error("moerl launch: cannot bind a loopback port", "pass --port P", ErrorCode::kIo);
  }
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// One output stream of one rank: bytes read so far that do not end a line yet.
struct Stream {
  int fd = -1;
  int rank = 0;
  FILE* out = nullptr;
  std::string partial;
};

void emit(Stream& s, bool prefix, bool flush_partial) {
  size_t start = 0, nl;
  while ((nl = s.partial.find('\n', start)) != std::string::npos) {
    if (prefix) std::fprintf(s.out, "[rank %d] ", s.rank);
    std::fwrite(s.partial.data() + start, 1, nl - start + 1, s.out);
    start = nl + 1;
  }
  s.partial.erase(0, start);
  if (flush_partial && !s.partial.empty()) {
    if (prefix) std::fprintf(s.out, "[rank %d] ", s.rank);
    std::fprintf(s.out, "%s\n", s.partial.c_str());
    s.partial.clear();
  }
  std::fflush(s.out);
}

struct Rank {
  Subprocess process;
  int status = 0;  // exit code, or 128 + signal
};

Subprocess spawn(const std::vector<std::string>& cmd, const LaunchTopology& t, int local, int out_fd, int err_fd) {
  SpawnOptions o;
  o.group = ProcessGroup::kNew;  // own group: the launcher alone decides which signals reach the rank
  // A launcher killed outright (a pod's PID 1 OOM-killed, SIGKILL from a test) must take its
  // ranks along: nothing else would stop them. NOTE: spawned from the main thread, which lives
  // as long as the launcher.
  o.parent_death_signal = SIGKILL;
  o.stdout_to = Redirect::to_fd(out_fd);
  o.stderr_to = Redirect::to_fd(err_fd);
  o.set_env = {{"MASTER_ADDR", t.master_addr},
               {"MASTER_PORT", std::to_string(t.master_port)},
               {"WORLD_SIZE", std::to_string(t.world_size())},
               {"RANK", std::to_string(t.global_rank(local))},
               {"LOCAL_RANK", std::to_string(local)},
               {"LOCAL_WORLD_SIZE", std::to_string(t.nproc_per_node)},
               {"GROUP_RANK", std::to_string(t.node_rank)}};
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  o.default_env = {{"OMP_NUM_THREADS", std::to_string(std::max(1u, cores / static_cast<unsigned>(t.nproc_per_node)))}};
  if (t.loopback_master()) {
    // All ranks on this machine: libfabric's socket providers bind to loopback unless told
    // otherwise. Across nodes the pod's own interface (or EFA) is the right one.
    o.default_env.push_back({"FI_TCP_IFACE", "lo"});
    o.default_env.push_back({"FI_SOCKETS_IFACE", "lo"});
  }
  std::vector<std::string> argv = cmd;
  if (argv[0] == "moerl") argv[0] = "/proc/self/exe";
  return Subprocess::spawn(argv, o);
}

int run_launch(Args& args) {
  if (args.flag("--help") || args.flag("-h")) {
    std::printf(
        "usage: moerl launch -n N [--port P] [--no-prefix] [--grace S] [--] CMD [ARGS...]\n"
        "       moerl launch --nproc-per-node G [--nnodes N] [--node-rank K] [--master-addr A] [--master-port P]\n"
        "                    [--no-prefix] [--grace S] -- CMD [ARGS...]\n"
        "-n N: N ranks on this machine, MASTER_ADDR=127.0.0.1 and a free port (or --port).\n"
        "--nproc-per-node G: the G ranks of node K in a group of N nodes (torchrun-like): RANK = K*G + local,\n"
        "WORLD_SIZE = N*G; rank 0 (node 0) serves the group's TCPStore at A:P. --nnodes, --node-rank,\n"
        "--master-addr, --master-port default to PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT\n"
        "(Kubeflow), else the pod's node-level WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT; one node without\n"
        "them: 127.0.0.1 and a free port.\n"
        "Ranks get RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT (and\n"
        "FI_TCP_IFACE=lo when the master is loopback). Output lines are prefixed with [rank i] (unless\n"
        "--no-prefix). SIGINT/SIGTERM are forwarded to every rank, and launch exits with the ranks' status\n"
        "(0 when all exit 0). If a rank fails, the others get SIGTERM and launch exits with the failed rank's\n"
        "status. Ranks still running --grace seconds (default 3) after a SIGTERM get SIGKILL. Ranks die with\n"
        "the launcher.\n");
    return 0;
  }
  LaunchFlags flags;
  flags.n = args.value("-n");
  flags.port = args.value("--port");
  flags.nproc_per_node = args.value("--nproc-per-node");
  flags.nnodes = args.value("--nnodes");
  flags.node_rank = args.value("--node-rank");
  flags.master_addr = args.value("--master-addr");
  flags.master_port = args.value("--master-port");
  const bool prefix = !args.flag("--no-prefix");
  const double grace = args.number("--grace", 3);
  std::vector<std::string> cmd = args.rest();
  if (cmd.empty()) {
    cmd = args.unused();
  } else if (!args.unused().empty()) {
    throw Error("moerl launch: unexpected '" + args.unused()[0] + "' before --", "write moerl launch -n N -- CMD ...");
  }
  LaunchTopology topo = resolve_launch_topology(flags, env::launch_env());
  if (cmd.empty()) throw Error("moerl launch: no command to run", "e.g. moerl launch -n 2 -- moerl bench ep");
  if (topo.master_port == 0) topo.master_port = free_port();
  const int n = topo.nproc_per_node;

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::vector<Rank> ranks(n);
  std::vector<Stream> streams;
  for (int r = 0; r < n; ++r) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) throw Error("moerl launch: pipe() failed", "", ErrorCode::kIo);
    ranks[r].process = spawn(cmd, topo, r, out[1], err[1]);
    close(out[1]);
    close(err[1]);
    streams.push_back({out[0], topo.global_rank(r), stdout, ""});
    streams.push_back({err[0], topo.global_rank(r), stderr, ""});
  }

  int failed_rank = -1, result = 0;
  int forwarded = 0;
  double kill_at = -1;
  double all_exited_at = -1;
  auto now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  auto signal_all = [&](int sig) {
    for (auto& r : ranks) r.process.signal(sig);
  };
  for (;;) {
    std::vector<pollfd> fds;
    for (auto& s : streams)
      if (s.fd >= 0) fds.push_back({s.fd, POLLIN, 0});
    if (!fds.empty()) poll(fds.data(), fds.size(), 50);
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (auto& s : streams) {
      if (s.fd < 0) continue;
      pollfd p{s.fd, POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) continue;
      char buf[65536];
      ssize_t got = read(s.fd, buf, sizeof(buf));
      if (got > 0) {
        s.partial.append(buf, static_cast<size_t>(got));
        emit(s, prefix, false);
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        emit(s, prefix, true);
        close(s.fd);
        s.fd = -1;
      }
    }
    if (g_signal && forwarded != g_signal) {
      forwarded = g_signal;
      signal_all(g_signal);
      if (kill_at < 0) kill_at = now() + grace;
    }
    bool any_running = false;
    for (int r = 0; r < n; ++r) {
      if (ranks[r].process.exit_status()) continue;
      if (std::optional<int> st = ranks[r].process.poll()) {
        ranks[r].status = *st;
        if (ranks[r].status != 0 && failed_rank < 0 && !g_signal) {
          failed_rank = r;
          result = ranks[r].status;
          std::fprintf(stderr, "moerl launch: rank %d exited with status %d; stopping the other ranks\n",
                       topo.global_rank(r), result);
          signal_all(SIGTERM);
          kill_at = now() + grace;
        }
      } else {
        any_running = true;
      }
    }
    if (kill_at > 0 && now() > kill_at) {
      signal_all(SIGKILL);
      kill_at = now() + 3600;
    }
    bool streams_open = false;
    for (auto& s : streams) streams_open |= s.fd >= 0;
    // A rank's children may hold its pipes open: after every rank is gone, read what is
    // buffered for at most a second.
    if (!any_running) {
      if (all_exited_at < 0) all_exited_at = now();
      if (!streams_open || now() > all_exited_at + 1) break;
    }
  }
  for (auto& s : streams) emit(s, prefix, true);
  if (failed_rank >= 0) return result;
  // NOTE: after a forwarded SIGINT/SIGTERM the ranks' own statuses decide: ranks that drained
  // and exited 0 (a rollout instance on a Spot notice) leave the launcher, i.e. the pod, at 0.
  for (auto& r : ranks)
    if (r.status != 0) return r.status;
  return 0;
}

}  // namespace

MOERL_COMMAND("launch", "start N local ranks of a command (torchrun-like)", run_launch);

}  // namespace moerl::cli
