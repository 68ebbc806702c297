// AdamW: float32 masters for low-precision parameters (updates below the parameter's rounding
// step accumulate), and a checkpointed state that resumes bit for bit.
#include "train/adamw.h"

#include <gtest/gtest.h>

namespace moerl::train {
namespace {

// A bf16 parameter at 1.0 (rounding step 2^-7 = 0.0078) takes steps of about lr = 1e-3:
// without a float32 master every step rounds back to 1.0.
TEST(AdamW, SmallUpdatesAccumulateOnBf16ParametersThroughTheMaster) {
  at::Tensor p = at::ones({4}, at::kBFloat16).set_requires_grad(true);
  AdamW opt({{"w", p}}, {.lr = 1e-3});
  for (int i = 0; i < 20; ++i) {
    p.mutable_grad() = at::ones({4}, at::kBFloat16);
    opt.step(1e-3);
  }
  // 20 steps of ~1e-3: the master is near 0.98, the parameter its rounding.
  at::Tensor master = opt.state().at("master.w");
  EXPECT_EQ(master.scalar_type(), at::kFloat);
  EXPECT_NEAR(master[0].item<float>(), 0.98f, 1e-3);
  EXPECT_LT(p[0].item<float>(), 0.99f) << "the bf16 parameter never moved";
  EXPECT_TRUE(at::equal(p.to(at::kFloat), master.to(at::kBFloat16).to(at::kFloat)));
}

TEST(AdamW, Float32ParametersHaveNoMaster) {
  at::Tensor p = at::ones({3}).set_requires_grad(true);
  AdamW opt({{"w", p}}, {});
  EXPECT_EQ(opt.state().count("master.w"), 0u);
}

// Save after 3 steps, load into a fresh optimizer over a copy of the parameter: the next
// steps are identical to the uninterrupted ones (masters included).
TEST(AdamW, StateRestoresMastersBitForBit) {
  auto run = [](at::Tensor p, AdamW& opt, int steps, int first) {
    for (int i = first; i < first + steps; ++i) {
      p.mutable_grad() = at::full({2}, 0.1 * (i + 1), at::kBFloat16);
      opt.step(1e-3);
    }
  };
  at::Tensor a = at::ones({2}, at::kBFloat16).set_requires_grad(true);
  AdamW oa({{"w", a}}, {.weight_decay = 0.01});
  run(a, oa, 3, 0);
  std::map<std::string, at::Tensor> saved;
  for (const auto& [k, v] : oa.state()) saved[k] = v.clone();
  at::Tensor b = a.detach().clone().set_requires_grad(true);
  AdamW ob({{"w", b}}, {.weight_decay = 0.01});
  ob.load_state(saved);
  run(a, oa, 5, 3);
  run(b, ob, 5, 3);
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_TRUE(at::equal(oa.state().at("master.w"), ob.state().at("master.w")));
}

}  // namespace
}  // namespace moerl::train
