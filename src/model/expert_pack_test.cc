// Packed experts: the model holds each MoE layer's experts once (per-expert parameters are
// views of one packed storage), updates through either side are seen by the other, models
// built from another model's tensors share them, and training still reaches every leaf.
#include <gtest/gtest.h>

#include <set>

#include "model/common/expert_pack.h"
#include "model/model.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

std::vector<ExpertWeights> layer_experts(const Model& m, int64_t layer) {
  return m.arch().bind_layer(m.config(), m.experts(), m.state(), layer).moe.experts;
}

TEST(ExpertPack, PackedViewFindsOnlyThePackedLayout) {
  at::manual_seed(1);
  std::vector<ExpertWeights> loose;
  for (int e = 0; e < 3; ++e) loose.push_back({at::randn({5, 4}), at::randn({5, 4}), at::randn({4, 5})});
  EXPECT_FALSE(packed_view(loose).w13_E2IH.defined());
  std::vector<ExpertWeights> packed = pack_experts(loose);
  PackedExperts p = packed_view(packed);
  ASSERT_TRUE(p.w13_E2IH.defined());
  EXPECT_EQ(p.w13_E2IH.sizes(), at::IntArrayRef({3, 10, 4}));
  EXPECT_EQ(p.w2_EHI.sizes(), at::IntArrayRef({3, 4, 5}));
  for (int e = 0; e < 3; ++e) {
    EXPECT_TRUE(at::equal(p.w13_E2IH[e].narrow(0, 0, 5), loose[e].gate_IH));
    EXPECT_TRUE(at::equal(p.w13_E2IH[e].narrow(0, 5, 5), loose[e].up_IH));
    EXPECT_TRUE(at::equal(p.w2_EHI[e], loose[e].down_HI));
  }
  // Out of order is not the packed layout.
  std::swap(packed[0], packed[1]);
  EXPECT_FALSE(packed_view(packed).w13_E2IH.defined());
}

TEST(ExpertPack, ModelHoldsExpertsOnceAndInPlaceUpdatesReachThePack) {
  Model m = init_random(testing::tiny_qwen3(/*all_moe=*/true), 3);
  std::set<const void*> storages;
  for (int64_t i = 0; i < m.config().num_hidden_layers; ++i) {
    std::vector<ExpertWeights> ex = layer_experts(m, i);
    PackedExperts p = packed_view(ex);
    ASSERT_TRUE(p.w13_E2IH.defined()) << "layer " << i << " experts are not packed";
    EXPECT_TRUE(storages.insert(p.w13_E2IH.storage().data()).second) << "layers share one pack";
    EXPECT_TRUE(ex[1].up_IH.is_leaf() && ex[1].up_IH.requires_grad());
    // An optimizer-style in-place update of a parameter is seen by the pack.
    {
      at::NoGradGuard g;
      ex[1].up_IH.add_(1.0);
    }
    EXPECT_TRUE(at::equal(p.w13_E2IH[1].narrow(0, ex[1].up_IH.size(0), ex[1].up_IH.size(0)), ex[1].up_IH));
  }
  // A model built from this one's tensors (no copy) shares the packs; one built from clones does not.
  Model shared(m.config(), m.state());
  EXPECT_EQ(layer_experts(shared, 0)[0].gate_IH.data_ptr(), layer_experts(m, 0)[0].gate_IH.data_ptr());
  Params copy;
  for (const auto& [name, t] : m.state()) copy[name] = t.detach().clone();
  Model other(m.config(), std::move(copy));
  EXPECT_NE(layer_experts(other, 0)[0].gate_IH.data_ptr(), layer_experts(m, 0)[0].gate_IH.data_ptr());
  EXPECT_TRUE(packed_view(layer_experts(other, 0)).w13_E2IH.defined());
}

TEST(ExpertPack, GradientsReachEveryExpertLeaf) {
  Model m = init_random(testing::tiny_qwen3(/*all_moe=*/true), 4);
  at::Tensor ids = at::randint(0, m.config().vocab_size, {2, 12}, at::kLong);
  m.forward({ids}).logits_BTV.square().mean().backward();
  int64_t with_grad = 0, experts = 0;
  for (const ExpertWeights& e : layer_experts(m, 0)) {
    ++experts;
    if (e.gate_IH.grad().defined() && e.down_HI.grad().defined()) ++with_grad;
  }
  EXPECT_GT(with_grad, 0);
  EXPECT_EQ(experts, m.experts().count);
}

}  // namespace
}  // namespace moerl::model
