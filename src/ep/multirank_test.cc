// Cross-backend check on 2 and 4 ranks (shm and tcp): fabric and alltoall return the same
// rows and the same combined sums bit for bit on random (non-integer) payloads, in both
// modes. What every backend must do on its own is in the conformance suite
// (conformance_test.cc).
#include <gtest/gtest.h>

#include "ep/conformance.h"
#include "ep/ep.h"
#include "ep/test_ranks.h"

namespace moerl::ep {
namespace {

MOERL_EP_SCENARIO(fabric_equals_alltoall) {
  for (Mode mode : {Mode::kNormal, Mode::kLowLatency}) {
    SCOPED_TRACE(mode_name(mode));
    auto fabric = make_group(testing::config(Backend::kFabric, mode, 64, 32), 256);
    auto a2a = make_group(testing::config(Backend::kAllToAll, mode, 64, 32), 256);
    at::manual_seed(100 + fabric->rank());
    at::Tensor x = at::randn({64, 32});
    at::Tensor idx = std::get<1>(at::rand({64, 256}).topk(8, 1));
    at::Tensor w = at::rand({64, 8});
    Dispatched d = fabric->dispatch(x, idx, w, fabric->get_dispatch_layout(idx, 256));
    at::Tensor y = fabric->combine(d.recv_x_NH * 1.37 + 0.01, d.handle);
    Dispatched da = a2a->dispatch(x, idx, w, a2a->get_dispatch_layout(idx, 256));
    EXPECT_TRUE(da.recv_x_NH.equal(d.recv_x_NH));
    EXPECT_TRUE(da.recv_topk_idx_NK.equal(d.recv_topk_idx_NK));
    EXPECT_TRUE(da.recv_topk_weights_NK.equal(d.recv_topk_weights_NK));
    EXPECT_EQ(da.num_recv_tokens_per_expert, d.num_recv_tokens_per_expert);
    EXPECT_TRUE(a2a->combine(da.recv_x_NH * 1.37 + 0.01, da.handle).equal(y)) << "fabric and alltoall differ";
  }
}

std::vector<int> ok(int n) { return std::vector<int>(n, 0); }

TEST(EpMultiRank, FabricEqualsAllToAll2RanksShm) {
  EXPECT_EQ(testing::run_ranks("fabric_equals_alltoall", 2, {{"FI_PROVIDER", "shm"}}), ok(2));
}
TEST(EpMultiRank, FabricEqualsAllToAll2RanksTcp) {
  EXPECT_EQ(testing::run_ranks("fabric_equals_alltoall", 2, {{"FI_PROVIDER", "tcp"}}), ok(2));
}
TEST(EpMultiRank, FabricEqualsAllToAll4RanksShm) {
  EXPECT_EQ(testing::run_ranks("fabric_equals_alltoall", 4, {{"FI_PROVIDER", "shm"}}), ok(4));
}
TEST(EpMultiRank, FabricEqualsAllToAll4RanksTcp) {
  EXPECT_EQ(testing::run_ranks("fabric_equals_alltoall", 4, {{"FI_PROVIDER", "tcp"}}), ok(4));
}

}  // namespace
}  // namespace moerl::ep
