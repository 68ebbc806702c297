// Routed experts recognised by name in every architecture's layout; a sharded checkpoint
// written rank by rank (model/sharded_files.h) loads back whole; a lockstep rank with no
// prompts still makes every forward call of a generation (a placeholder row).
#include "model/sharded_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/files.h"
#include "model/expert_names.h"
#include "model/generate.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

TEST(ExpertNames, RoutedExpertsOfEveryLayout) {
  EXPECT_EQ(routed_expert_index("model.layers.3.mlp.experts.17.up_proj.weight"), 17);
  EXPECT_EQ(routed_expert_index("model.layers.0.block_sparse_moe.experts.2.w1.weight"), 2);  // Mixtral
  EXPECT_EQ(routed_expert_index("model.layers.0.mlp.experts.0.down_proj.weight"), 0);
  for (const char* dense : {"model.layers.3.mlp.shared_experts.up_proj.weight",  // DeepSeek-V3
                            "model.layers.3.mlp.shared_expert.up_proj.weight",   // Qwen2-MoE
                            "model.layers.3.mlp.gate.weight", "model.layers.3.mlp.gate.e_score_correction_bias",
                            "model.layers.3.mlp.experts.gate_up_proj",  // transformers 5's fused name
                            "model.embed_tokens.weight", "lm_head.weight", "model.layers.3.mlp.experts.x.w1"}) {
    EXPECT_FALSE(routed_expert_index(dense).has_value()) << dense;
  }
}

TEST(ShardedFiles, ShardsWrittenRankByRankLoadWhole) {
  for (const io::HfConfig& cfg : {testing::tiny_qwen3(), testing::tiny_mixtral()}) {
    ScratchDir tmp("sharded-files");
    const Model m = init_random(cfg, 9);
    std::vector<nlohmann::json> descriptions;
    for (int r = 0; r < 2; ++r) {
      nlohmann::json d = write_model_shard(m, r, 2, tmp.path());
      EXPECT_EQ(d["file"], shard_file_name("model", r, 2));
      for (const auto& n : d["names"]) {  // rank 1's shard holds experts only
        if (r == 1) EXPECT_TRUE(is_routed_expert(n.get<std::string>())) << n;
      }
      descriptions.push_back(d);
    }
    // Rank 1's shard lists none: a one-rank model holds every expert, and shard_tensors
    // gives rank 0 all of them. The files are still one loadable checkpoint.
    std::ofstream(tmp.path() + "/" + kShardIndexFile) << shard_index_json({descriptions[0]});
    write_model_config(m, tmp.path());
    Model back = load_model(tmp.path());
    for (const auto& [name, t] : m.state()) EXPECT_TRUE(at::equal(back.state().at(name), t)) << cfg.model_type << " " << name;
  }
}

TEST(GenerateLockstep, ARankWithoutPromptsMakesEveryForwardCall) {
  Model m = init_random(testing::tiny_qwen3(), 4);
  GenerateConfig g;
  g.max_new_tokens = 6;
  g.seed = 1;
  g.pad_id = 0;
  int calls = 0;
  g.all_done = [&calls](bool) { return ++calls == 3; };  // the other ranks finish at the 3rd step
  std::vector<Generation> out = generate(m, {}, g);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(calls, 3) << "the placeholder row must step with the others until all are done";
}

}  // namespace
}  // namespace moerl::model
