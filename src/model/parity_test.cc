// Parity with Hugging Face transformers (tests/fixtures, made by make_fixtures.py):
// logits within 1e-4, greedy continuations token for token (a reference choice that is a
// near-tie within that rounding may differ), left-padded batches, and the
// transformers 5 fused-expert layout.
#include <gtest/gtest.h>

#include <c10/core/InferenceMode.h>

#include <cstdio>
#include <filesystem>

#include "base/files.h"
#include "io/tensor_io.h"
#include "model/generate.h"
#include "model/model.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

using testing::fixture_dir;
using testing::max_abs_diff;

class Parity : public ::testing::TestWithParam<std::string> {};

TEST_P(Parity, LogitsMatchTransformers) {
  const std::string dir = fixture_dir(GetParam());
  Model m = load_model(dir);
  auto in = io::load_tensors(dir + "/inputs.safetensors");
  auto ref = io::load_tensors(dir + "/reference.safetensors");
  c10::InferenceMode guard;
  at::Tensor logits = m.forward({in.at("input_ids")}).logits_BTV;
  ASSERT_EQ(logits.sizes(), ref.at("logits").sizes());
  const double diff = max_abs_diff(logits, ref.at("logits"));
  EXPECT_LE(diff, testing::kLogitTol) << GetParam();
  std::printf("[parity] %s: max |logits - transformers| = %.3g\n", GetParam().c_str(), diff);
  // Reference logits are far from zero: a broken model cannot pass by accident.
  EXPECT_GT(ref.at("logits").abs().max().item<double>(), 1.0);
}

TEST_P(Parity, LeftPaddedLogitsMatchTransformers) {
  const std::string dir = fixture_dir(GetParam());
  Model m = load_model(dir);
  auto in = io::load_tensors(dir + "/inputs.safetensors");
  auto ref = io::load_tensors(dir + "/reference.safetensors");
  c10::InferenceMode guard;
  at::Tensor mask = in.at("padded_mask");
  at::Tensor logits = m.forward({in.at("padded_ids"), mask}).logits_BTV;
  at::Tensor keep = mask.ne(0).unsqueeze(-1);
  const double diff = max_abs_diff(logits.masked_fill(keep.logical_not(), 0),
                                   ref.at("padded_logits").masked_fill(keep.logical_not(), 0));
  EXPECT_LE(diff, testing::kLogitTol) << GetParam();
}

// KV-cache decode against transformers' full forward: prefill the first columns of the
// left-padded batch, then feed one column per step; every step's logits must match the
// reference (MLA decodes in the absorbed order here, so this checks it against HF too).
TEST_P(Parity, CachedDecodeMatchesTransformersFullForward) {
  const std::string dir = fixture_dir(GetParam());
  Model m = load_model(dir);
  auto in = io::load_tensors(dir + "/inputs.safetensors");
  auto ref = io::load_tensors(dir + "/reference.safetensors");
  c10::InferenceMode guard;
  at::Tensor ids = in.at("padded_ids"), mask = in.at("padded_mask"), want = ref.at("padded_logits");
  const int64_t B = ids.size(0), T = ids.size(1), P = 5;
  KvCache cache = m.make_cache(B, T);
  m.forward({ids.narrow(1, 0, P), mask.narrow(1, 0, P), {}, &cache});
  double worst = 0;
  for (int64_t t = P; t < T; ++t) {
    at::Tensor step = m.forward({ids.narrow(1, t, 1), mask.narrow(1, t, 1), {}, &cache}).logits_BTV;
    at::Tensor keep = mask.narrow(1, t, 1).ne(0).unsqueeze(-1);
    worst = std::max(worst, max_abs_diff(step.masked_fill(keep.logical_not(), 0),
                                         want.narrow(1, t, 1).masked_fill(keep.logical_not(), 0)));
  }
  EXPECT_LE(worst, testing::kLogitTol) << GetParam();
  std::printf("[parity] %s: cached decode max |logits - transformers| = %.3g\n", GetParam().c_str(), worst);
}

TEST_P(Parity, GreedyContinuationMatchesTransformers) {
  const std::string dir = fixture_dir(GetParam());
  Model m = load_model(dir);
  auto in = io::load_tensors(dir + "/inputs.safetensors");
  auto ref = io::load_tensors(dir + "/reference.safetensors");
  at::Tensor ids = in.at("input_ids"), want = ref.at("greedy_ids");
  const int64_t B = ids.size(0), T = ids.size(1), N = want.size(1) - T;
  std::vector<std::vector<int64_t>> prompts(B);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) prompts[b].push_back(ids[b][t].item<int64_t>());
  }
  GenerateConfig g;
  g.max_new_tokens = N;
  g.sampling.greedy = true;
  std::vector<Generation> out = generate(m, prompts, g);
  at::Tensor got = want.clone();
  for (int64_t b = 0; b < B; ++b) {
    ASSERT_EQ(static_cast<int64_t>(out[b].tokens.size()), N);
    for (int64_t i = 0; i < N; ++i) got[b][T + i] = out[b].tokens[i];
    EXPECT_EQ(out[b].finish, FinishReason::kLength);
  }
  testing::expect_greedy_matches(m, got, want, T, GetParam());
}

// What we save is what transformers saved: same tensor names, shapes and values, so the
// checkpoint loads back in transformers; and the re-saved config round-trips.
TEST_P(Parity, SavedCheckpointHasTransformersLayout) {
  const std::string dir = fixture_dir(GetParam());
  const std::string out = ::testing::TempDir() + "/resave_" + GetParam();
  remove_tree(out);
  load_model(dir).save(out);
  auto theirs = io::load_tensors(dir + "/model.safetensors");
  auto ours = io::load_tensors(out);
  ASSERT_EQ(ours.size(), theirs.size());
  for (const auto& [name, t] : theirs) {
    ASSERT_TRUE(ours.count(name)) << name;
    EXPECT_EQ(ours.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(at::equal(ours.at(name), t)) << name;
  }
  io::HfConfig a = io::HfConfig::load(dir + "/config.json"), b = io::HfConfig::load(out + "/config.json");
  EXPECT_EQ(a.to_json(), b.to_json());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Parity,
                         ::testing::Values("qwen3_moe_tied", "qwen3_moe_untied", "qwen3_moe_sparse_step", "mixtral",
                                           "deepseek_v3_qlora", "deepseek_v3_noqlora", "qwen2_moe",
                                           "qwen2_moe_sparse_step"));

// transformers 5 keeps experts fused in memory (mlp.experts.gate_up_proj [E,2I,H],
// down_proj [E,H,I]; mixtral under mlp.*): a checkpoint in that layout loads identically.
class FusedLayout : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedLayout, LoadsAndMatches) {
  const std::string src = fixture_dir(GetParam());
  const std::string dir = ::testing::TempDir() + "/fused_" + GetParam();
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(src + "/config.json", dir + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(src + "/fused.safetensors", dir + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  auto raw = io::load_tensors(dir);
  bool has_fused = false;
  for (const auto& [name, _] : raw) has_fused |= name.find("experts.gate_up_proj") != std::string::npos;
  ASSERT_TRUE(has_fused) << "fixture no longer holds the fused layout";
  Model m = load_model(dir);
  auto in = io::load_tensors(src + "/inputs.safetensors");
  auto ref = io::load_tensors(src + "/reference.safetensors");
  c10::InferenceMode guard;
  EXPECT_LE(max_abs_diff(m.forward({in.at("input_ids")}).logits_BTV, ref.at("logits")), testing::kLogitTol);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FusedLayout,
                         ::testing::Values("qwen3_moe_tied", "mixtral", "deepseek_v3_qlora", "qwen2_moe"));

}  // namespace
}  // namespace moerl::model
