// A dead or hung peer makes the surviving rank fail with a clear error (naming its rank,
// the peer and what it waited for) within the configured timeout, instead of hanging.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "base/deadline.h"
#include "base/error.h"
#include "ep/ep.h"
#include "ep/test_ranks.h"

namespace moerl::ep {
namespace {

// Rank 1 joins the group, then dies (`hang` = false) or stops responding; rank 0
// dispatches and must get moerl::Error quickly. Ranks leave with _exit: a failed peer
// leaves transports in states whose teardown is not the point of this test.
void survivor_fails_clearly(Backend backend, bool hang) {
  Config cfg;
  cfg.backend = backend;
  cfg.max_tokens_per_rank = 16;
  cfg.hidden = 8;
  cfg.timeout_s = 2;
  auto g = make_group(cfg, 4);
  if (g->rank() == 1) {
    if (hang) std::this_thread::sleep_for(std::chrono::seconds(4));
    std::fflush(nullptr);
    _exit(0);
  }
  at::Tensor x = at::randn({4, 8});
  at::Tensor idx = at::tensor({0, 2, 1, 3, 2, 3, 0, 1}, at::kLong).view({4, 2});
  const double t0 = now_seconds();
  bool ok = false;
  try {
    Dispatched d = g->dispatch(x, idx, at::ones({4, 2}), g->get_dispatch_layout(idx, 4));
    g->combine(d.recv_x_NH, d.handle);
    std::fprintf(stderr, "rank 0: dispatch/combine succeeded with a %s peer\n", hang ? "hung" : "dead");
  } catch (const Error& e) {
    const std::string msg = e.what();
    const double took = now_seconds() - t0;
    std::fprintf(stderr, "rank 0 got (after %.1fs): %s\n", took, msg.c_str());
    ok = msg.find("rank 0") != std::string::npos && msg.find("rank 1") != std::string::npos &&
         (msg.find("dispatch") != std::string::npos || msg.find("exchange") != std::string::npos) &&
         took < 6;
  }
  std::fflush(nullptr);
  _exit(ok ? 0 : 1);
}

MOERL_EP_SCENARIO(fabric_dead_peer) { survivor_fails_clearly(Backend::kFabric, false); }
MOERL_EP_SCENARIO(fabric_hung_peer) { survivor_fails_clearly(Backend::kFabric, true); }
MOERL_EP_SCENARIO(alltoall_hung_peer) { survivor_fails_clearly(Backend::kAllToAll, true); }

TEST(EpFailure, FabricDeadPeerShm) {
  EXPECT_EQ(testing::run_ranks("fabric_dead_peer", 2, {{"FI_PROVIDER", "shm"}}, 30)[0], 0);
}
TEST(EpFailure, FabricHungPeerShm) {
  EXPECT_EQ(testing::run_ranks("fabric_hung_peer", 2, {{"FI_PROVIDER", "shm"}}, 30)[0], 0);
}
TEST(EpFailure, FabricHungPeerTcp) {
  EXPECT_EQ(testing::run_ranks("fabric_hung_peer", 2, {{"FI_PROVIDER", "tcp"}}, 30)[0], 0);
}
TEST(EpFailure, AllToAllHungPeer) {
  EXPECT_EQ(testing::run_ranks("alltoall_hung_peer", 2, {}, 30)[0], 0);
}

}  // namespace
}  // namespace moerl::ep
