// The reward-model hook: a model directory with a value head scores texts, and the
// "model" RewardFn kind built from a [task] table uses it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "base/config.h"
#include "base/error.h"
#include "base/files.h"
#include "io/tensor_io.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "tasks/registry.h"
#include "tasks/reward_fn.h"
#include "train/reward_model.h"

namespace moerl::train {
namespace {

namespace fs = std::filesystem;

io::HfConfig small_config(int64_t vocab) {
  io::HfConfig c;
  c.model_type = "qwen3_moe";
  c.vocab_size = vocab;
  c.hidden_size = 16;
  c.intermediate_size = 32;
  c.moe_intermediate_size = 16;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 8;
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.max_position_embeddings = 64;
  return c;
}

TEST(RewardModel, ScoresTextsWithTheValueHead) {
  fs::path dir = fs::temp_directory_path() / ("moerl-rm-" + std::to_string(::getpid()));
  remove_tree(dir);
  model::CharTokenizer tok;
  model::Model m = model::init_random(small_config(tok.vocab_size()), 9);
  m.save(dir.string());
  tok.save(dir.string());
  EXPECT_THROW(ValueScorer{dir.string()}, Error);  // no value head yet
  at::Tensor w = at::randn({1, 16}), b = at::tensor({0.25f});
  io::save_tensors((dir / kValueHeadFile).string(), {{"value_head.weight", w}, {"value_head.bias", b}});

  ValueScorer scorer(dir.string());
  std::vector<std::string> texts = {"12+3=15", "7+1=8"};
  std::vector<double> got = scorer.score(texts);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < texts.size(); ++i) {  // reference: one text at a time, no padding
    at::NoGradGuard g;
    auto ids = tok.encode(texts[i], true);
    at::Tensor in = at::tensor(ids, at::kLong).unsqueeze(0);
    auto out = m.forward({.input_ids = in});
    double want = (at::matmul(out.hidden_BTH[0][static_cast<int64_t>(ids.size()) - 1], w[0]) + b[0]).item<double>();
    EXPECT_NEAR(got[i], want, 1e-4) << texts[i];
  }

  register_model_reward();
  std::string toml = "name = \"addition\"\nreward = \"model\"\nreward_model = \"" + dir.string() + "\"\n";
  ConfigDoc doc = ConfigDoc::parse(toml, "task.toml");
  ConfigTable t = doc.root();
  std::shared_ptr<const tasks::Task> task = tasks::make_task(t);
  auto fn = tasks::make_reward_fn(t, task);
  tasks::TaskItem it{"x", "12+3=", "15"};
  std::vector<double> r = fn->score({it}, {"15"});
  EXPECT_NEAR(r[0], 1.0 / (1.0 + std::exp(-got[0])), 1e-6);  // sigmoid of the raw score
  remove_tree(dir);
}

}  // namespace
}  // namespace moerl::train
