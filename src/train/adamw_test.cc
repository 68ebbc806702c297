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


// Parameters that are views of one packed tensor (a MoE layer's experts) with gradients packed
// alike: the state is laid out the same way (one block, so each pass is one kernel), and the
// updates, clipping included, equal those of separate tensors bit for bit. A gradient laid out
// otherwise, or missing, takes the per-tensor path with the same result.
TEST(AdamW, PackedParametersShareOneStateBlockAndUpdateAsSeparateTensorsDo) {
  const int64_t E = 3, n = 10;
  at::Tensor packed = at::randn({E * n}).to(at::kBFloat16);
  at::Tensor packed_grad = at::zeros({E * n}, at::kBFloat16);
  std::map<std::string, at::Tensor> views, loose;
  for (int64_t e = 0; e < E; ++e) {
    const std::string name = "experts." + std::to_string(e) + ".w";
    views[name] = packed.narrow(0, e * n, n).view({2, 5}).set_requires_grad(true);
    loose[name] = views[name].detach().clone().set_requires_grad(true);
  }
  views["dense"] = at::randn({4}).set_requires_grad(true);
  loose["dense"] = views["dense"].detach().clone().set_requires_grad(true);
  AdamW a(views, {.weight_decay = 0.1}), b(loose, {.weight_decay = 0.1});
  for (int step = 0; step < 4; ++step) {
    at::Tensor g = at::randn({E * n + 4}) * (step + 1);
    packed_grad.copy_(g.narrow(0, 0, E * n));
    for (int64_t e = 0; e < E; ++e) {
      const std::string name = "experts." + std::to_string(e) + ".w";
      // Step 2: expert 1 has no gradient, so the packed path does not apply.
      const bool none = step == 2 && e == 1;
      views[name].mutable_grad() = none ? at::Tensor() : packed_grad.narrow(0, e * n, n).view({2, 5}).detach();  // as expert_grad.h makes them
      loose[name].mutable_grad() = none ? at::Tensor() : views[name].grad().clone();
    }
    views["dense"].mutable_grad() = g.narrow(0, E * n, 4).clone();
    loose["dense"].mutable_grad() = g.narrow(0, E * n, 4).clone();
    const double na = a.clip_grad_norm(1.0), nb = b.clip_grad_norm(1.0);
    EXPECT_NEAR(na, nb, 1e-12 * nb);
    a.step(1e-2);
    b.step(1e-2);
    for (const auto& [name, p] : views) EXPECT_TRUE(at::equal(p, loose[name])) << name << " step " << step;
  }
  const std::map<std::string, at::Tensor> st = a.state();
  for (const char* kind : {"exp_avg.", "exp_avg_sq.", "master."}) {
    const auto* e0 = static_cast<const char*>(st.at(std::string(kind) + "experts.0.w").data_ptr());
    const auto* e2 = static_cast<const char*>(st.at(std::string(kind) + "experts.2.w").data_ptr());
    EXPECT_EQ(e2 - e0, 2 * n * 4) << kind << ": the experts' state is one block laid out as they are";
  }
  for (const auto& [k, v] : b.state()) EXPECT_TRUE(at::equal(v, st.at(k))) << k;
  a.zero_grad();
  EXPECT_EQ(packed_grad.abs().sum().item<float>(), 0.f) << "zero_grad clears the packed buffer";
}

// load_state fills the packed state in place: the blocks stay blocks and resume bit for bit.
TEST(AdamW, LoadStateKeepsThePackedLayout) {
  at::Tensor packed = at::randn({8}).to(at::kBFloat16), grads = at::randn({8}).to(at::kBFloat16);
  auto params = [](const at::Tensor& buf) {
    return std::map<std::string, at::Tensor>{{"a", buf.narrow(0, 0, 4).set_requires_grad(true)},
                                             {"b", buf.narrow(0, 4, 4).set_requires_grad(true)}};
  };
  std::map<std::string, at::Tensor> pa = params(packed);
  AdamW a(pa, {});
  for (auto& [k, p] : pa) p.mutable_grad() = grads.narrow(0, k == "a" ? 0 : 4, 4).detach();
  a.step(1e-2);
  at::Tensor copy = packed.clone();
  std::map<std::string, at::Tensor> pb = params(copy);
  AdamW b(pb, {});
  std::map<std::string, at::Tensor> saved;
  for (const auto& [k, v] : a.state()) saved[k] = v.clone();
  b.load_state(saved);
  const auto st = b.state();
  EXPECT_EQ(static_cast<const char*>(st.at("exp_avg.b").data_ptr()) -
                static_cast<const char*>(st.at("exp_avg.a").data_ptr()), 16);
  at::Tensor grads_b = grads.clone();
  for (auto& [k, p] : pb) p.mutable_grad() = grads_b.narrow(0, k == "a" ? 0 : 4, 4).detach();
  a.step(1e-2);
  b.step(1e-2);
  EXPECT_TRUE(at::equal(packed, copy));
}

}  // namespace
}  // namespace moerl::train
