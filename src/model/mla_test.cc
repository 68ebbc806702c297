// MLA pieces against independent references: the absorbed order equals the expanded one,
// the cost rule, the latent KV cache layout, interleaved RoPE, and YaRN's frequency table
// and softmax scale recomputed from the formulas of the YaRN paper / DeepSeek-V3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/common/mla_attention.h"
#include "model/common/rope.h"
#include "model/model.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

using testing::max_abs_diff;

MlaWeights random_mla(const MlaShape& s, int64_t H, bool q_lora, at::ScalarType dt) {
  auto r = [&](std::vector<int64_t> shape) {
    return (at::randn(shape, at::kDouble) / std::sqrt(static_cast<double>(shape.back()))).to(dt);
  };
  const int64_t qk = s.qk_nope_head_dim + s.qk_rope_head_dim, Hq = s.num_heads, R = s.kv_lora_rank;
  MlaWeights w;
  if (q_lora) {
    w.q_a_proj = r({10, H});
    w.q_a_norm = at::ones({10}, dt);
    w.q_b_proj = r({Hq * qk, 10});
  } else {
    w.q_proj = r({Hq * qk, H});
  }
  w.kv_a_proj = r({R + s.qk_rope_head_dim, H});
  w.kv_a_norm = (1 + 0.2 * at::randn({R}, at::kDouble)).to(dt);
  w.kv_b_proj = r({Hq * (s.qk_nope_head_dim + s.v_head_dim), R});
  w.o_proj = r({H, Hq * s.v_head_dim});
  return w;
}

TEST(Mla, AbsorbedOrderEqualsExpandedOrder) {
  at::manual_seed(3);
  const io::HfConfig cfg = testing::tiny_deepseek();
  const MlaShape s = mla_shape(cfg);
  for (bool q_lora : {true, false}) {
    MlaWeights w = random_mla(s, cfg.hidden_size, q_lora, at::kDouble);
    const int64_t B = 2, T = 3, S = 9;
    at::Tensor x = at::randn({B, S, cfg.hidden_size}, at::kDouble);
    at::Tensor pos = at::arange(S, at::kLong).unsqueeze(0).expand({B, S});
    auto [cos, sin] = rope_cos_sin(pos, rope_table(cfg, cfg.head_dim, at::kDouble, at::kCPU), at::kDouble);
    MlaProjection p = mla_project(w, s, x, cos, sin);
    at::Tensor q = p.q_BhTD.narrow(2, S - T, T);  // the last T tokens query all S
    at::Tensor allowed = at::ones({B, 1, T, S}, at::kBool);
    allowed[1][0][0].narrow(0, 0, 2).fill_(false);  // some masked keys
    at::Tensor a = mla_attend(w, s, q, p.latent_BTC, allowed, /*absorb=*/true);
    at::Tensor e = mla_attend(w, s, q, p.latent_BTC, allowed, /*absorb=*/false);
    EXPECT_LE(max_abs_diff(a, e), 1e-12) << "q_lora " << q_lora;
    EXPECT_GT(e.abs().max().item<double>(), 1e-2);
  }
}

TEST(Mla, CostRuleAbsorbsDecodeAndExpandsFullSequences) {
  MlaShape v3;  // DeepSeek-V3's sizes
  v3.num_heads = 128;
  v3.kv_lora_rank = 512;
  v3.qk_nope_head_dim = 128;
  v3.qk_rope_head_dim = 64;
  v3.v_head_dim = 128;
  EXPECT_TRUE(mla_absorbs(v3, 1, 4096));
  EXPECT_TRUE(mla_absorbs(v3, 64, 4096));
  EXPECT_FALSE(mla_absorbs(v3, 4096, 4096));  // training / prefill: expand
  EXPECT_FALSE(mla_absorbs(v3, 1, 1));
}

TEST(Mla, CacheHoldsTheLatentPerToken) {
  const io::HfConfig cfg = testing::tiny_deepseek();
  Model m = init_random(cfg, 1);
  KvCache c = m.make_cache(3, 20);
  ASSERT_EQ(c.latent.size(), static_cast<size_t>(cfg.num_hidden_layers));
  EXPECT_TRUE(c.k.empty() && c.v.empty());
  EXPECT_EQ(c.latent[0].sizes(), at::IntArrayRef({3, 20, cfg.kv_lora_rank + cfg.qk_rope_head_dim}));
  // GQA archs keep per-head keys and values.
  KvCache g = init_random(testing::tiny_qwen3(), 1).make_cache(3, 20);
  EXPECT_TRUE(g.latent.empty());
  EXPECT_EQ(g.k[0].sizes(), at::IntArrayRef({3, 2, 20, 8}));
}

TEST(Rope, InterleavedPairsEqualRotateHalfOfDeinterleavedInput) {
  at::manual_seed(8);
  at::Tensor x = at::randn({2, 3, 5, 8}, at::kDouble);
  at::Tensor pos = at::randint(0, 50, {2, 5}, at::kLong);
  auto [cos, sin] = rope_cos_sin(pos, 8, 10000.0, at::kDouble);
  at::Tensor got = apply_rope_interleaved(x, cos, sin);
  // Independent: rotate pair (x_{2j}, x_{2j+1}) by angle pos * inv_freq_j, output evens first.
  at::Tensor want = at::empty_like(x);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t t = 0; t < 5; ++t) {
      for (int64_t j = 0; j < 4; ++j) {
        const double ang = pos[b][t].item<double>() * std::pow(10000.0, -2.0 * j / 8);
        for (int64_t h = 0; h < 3; ++h) {
          const double e = x[b][h][t][2 * j].item<double>(), o = x[b][h][t][2 * j + 1].item<double>();
          want[b][h][t][j] = e * std::cos(ang) - o * std::sin(ang);
          want[b][h][t][4 + j] = o * std::cos(ang) + e * std::sin(ang);
        }
      }
    }
  }
  EXPECT_LE(max_abs_diff(got, want), 1e-12);
}

TEST(Rope, YarnTableAndScaleFollowTheFormulas) {
  io::HfConfig cfg = testing::tiny_deepseek();  // factor 4 from 32 positions, mscale 1 / 1
  cfg.qk_rope_head_dim = cfg.head_dim = 16;
  cfg.rope_scaling.truncate = true;
  const int64_t D = 16;
  RopeTable t = rope_table(cfg, D, at::kDouble, at::kCPU);
  // YaRN: dims whose wavelength fits fewer than beta_slow turns in the original context are
  // interpolated (freq / factor), more than beta_fast turns kept, a linear ramp between.
  auto corr = [&](double rot) { return D * std::log(32.0 / (rot * 2 * M_PI)) / (2 * std::log(cfg.rope_theta)); };
  const double low = std::max(0.0, std::floor(corr(32.0))), high = std::min(D - 1.0, std::ceil(corr(1.0)));
  for (int64_t j = 0; j < D / 2; ++j) {
    const double base = std::pow(cfg.rope_theta, -2.0 * j / D);
    const double ramp = std::clamp((j - low) / (high - low), 0.0, 1.0);
    const double want = base / 4.0 * ramp + base * (1 - ramp);
    EXPECT_NEAR(t.inv_freq[j].item<double>(), want, 1e-12 * want) << "j " << j;
  }
  EXPECT_DOUBLE_EQ(t.attention_factor, 1.0);  // mscale == mscale_all_dim
  const double m = 0.1 * std::log(4.0) + 1.0;
  EXPECT_NEAR(mla_shape(cfg).softmax_scale, m * m / std::sqrt(8.0 + 16.0), 1e-15);
  cfg.rope_scaling.mscale_all_dim.reset();  // cos/sin carry mscale(factor) instead
  EXPECT_NEAR(rope_table(cfg, D, at::kDouble, at::kCPU).attention_factor, m, 1e-15);
  EXPECT_NEAR(mla_shape(cfg).softmax_scale, 1.0 / std::sqrt(24.0), 1e-15);
}

}  // namespace
}  // namespace moerl::model
