// ControlGroup across real ranks (processes): reductions, flags, bytes broadcast / gathered /
// scattered with provenance checked exactly, rank 0's decisions and failures reaching every
// rank, and a dead peer failing the survivor with a clear error instead of a hang.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <chrono>
#include <string>
#include <thread>

#include "base/deadline.h"
#include "base/error.h"
#include "ep/test_ranks.h"
#include "ep/torch/control_group.h"

namespace moerl::ep {
namespace {

// A payload naming its rank and a size that differs by rank (0 bytes on rank 1), with
// bytes that are not text, so lengths and padding are checked, not just strings.
std::string payload(int rank) {
  std::string s = "rank" + std::to_string(rank) + ":";
  for (int i = 0; i < rank * 1000 && rank != 1; ++i) s.push_back(static_cast<char>((i * 7 + rank) & 0xff));
  return rank == 1 ? std::string() : s + std::string(1, '\0') + "end";
}

// Exits the rank with 0 when `ok`, else names the failed check.
void finish(bool ok, const char* what) {
  if (!ok) std::fprintf(stderr, "control group check failed: %s\n", what);
  std::fflush(nullptr);
  _exit(ok ? 0 : 1);
}

MOERL_EP_SCENARIO(control_collectives) {
  auto g = ControlGroup::join("test", 30);
  const int r = g->rank(), R = g->world_size();
  bool ok = true;
  std::vector<double> s = g->sum({1.0, static_cast<double>(r)});
  ok &= s[0] == R && s[1] == R * (R - 1) / 2.0;
  std::vector<double> m = g->max({static_cast<double>(r), -static_cast<double>(r)});
  ok &= m[0] == R - 1 && m[1] == 0;
  ok &= g->any(r == R - 1) && !g->any(false) && g->all(true) && !g->all(r != 0);
  // broadcast: rank 0's bytes (the others pass something else, ignored)
  ok &= g->broadcast(r == 0 ? payload(3) : "ignored") == payload(3);
  ok &= g->broadcast(r == 0 ? std::string() : "x").empty();
  // gather: rank 0 sees every rank's exact bytes in rank order
  std::vector<std::string> all = g->gather(payload(r));
  if (r == 0) {
    ok &= static_cast<int>(all.size()) == R;
    for (int k = 0; k < R && ok; ++k) ok &= all[k] == payload(k);
  } else {
    ok &= all.empty();
  }
  // scatter: rank k gets part k
  std::vector<std::string> parts;
  if (r == 0) {
    for (int k = 0; k < R; ++k) parts.push_back(payload(R - 1 - k));
  }
  ok &= g->scatter(parts) == payload(R - 1 - r);
  // lead_runs: the result on every rank; rank 0's failure as a moerl::Error with its hint
  ok &= g->lead_runs("pick", [] { return std::string("v42"); }) == "v42";
  try {
    g->lead_runs("claim", []() -> std::string { throw Error("the lease is lost", "restart", ErrorCode::kUnavailable); });
    ok = false;
  } catch (const Error& e) {
    const std::string msg = e.what();
    ok &= msg.find("the lease is lost") != std::string::npos && e.code() == ErrorCode::kUnavailable &&
          e.hint() == "restart" && (r == 0 || msg.find("rank 0 failed in claim") != std::string::npos);
  }
  ok &= g->sum({1.0})[0] == R;  // still in step after the failure
  finish(ok, "collectives");
}

// Rank 0 works for three times the group's timeout, beating; the others wait it out.
MOERL_EP_SCENARIO(control_beats) {
  auto g = ControlGroup::join("test", 3);
  const std::string got = g->lead_runs("long work", [](const ControlGroup::Beat& beat) {
    for (int i = 0; i < 16; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      beat();
    }
    return std::string("done");
  });
  finish(got == "done" && g->sum({1.0})[0] == g->world_size(), "beats");
}

MOERL_EP_SCENARIO(control_dead_peer) {
  auto g = ControlGroup::join("test", 20);
  if (g->rank() == 1) {
    std::fflush(nullptr);
    _exit(0);  // dies before the broadcast rank 0 waits in
  }
  const double t0 = now_seconds();
  try {
    g->broadcast("hello");
    g->sum({1.0});
    finish(false, "a collective with a dead peer succeeded");
  } catch (const Error& e) {
    const std::string msg = e.what();
    std::fprintf(stderr, "rank 0 got after %.1f s: %s\n", now_seconds() - t0, msg.c_str());
    finish(msg.find("rank 0 of 2") != std::string::npos && now_seconds() - t0 < 15, "dead peer error");
  }
}

TEST(ControlGroup, CollectivesOverThreeRanks) {
  EXPECT_EQ(testing::run_ranks("control_collectives", 3, {}, 60), std::vector<int>(3, 0));
}

TEST(ControlGroup, LongWorkOnRankZeroWithBeatsOutlastsTheTimeout) {
  EXPECT_EQ(testing::run_ranks("control_beats", 2, {}, 60), std::vector<int>(2, 0));
}

TEST(ControlGroup, DeadPeerFailsTheSurvivorWithAClearError) {
  EXPECT_EQ(testing::run_ranks("control_dead_peer", 2, {}, 60)[0], 0);
}

}  // namespace
}  // namespace moerl::ep
