// With an expert-parallel group of R ranks the model holds and loads only its experts
// [rank*E/R, (rank+1)*E/R); the values equal the full model's (same seed, any EP size).
#include <gtest/gtest.h>

#include <filesystem>

#include "base/error.h"
#include "base/files.h"
#include "model/model.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {


TEST(ExpertShards, RankHoldsAndLoadsOnlyItsExperts) {
  io::HfConfig cfg = testing::tiny_qwen3();
  Model full = init_random(cfg, 5);
  ModelOptions o;
  o.ep_group = std::make_shared<testing::ShapeOnlyGroup>(1, 2, cfg.num_experts);
  Model shard = init_random(cfg, 5, o);
  EXPECT_EQ(shard.experts().first, 4);
  EXPECT_EQ(shard.experts().count, 4);
  EXPECT_FALSE(shard.params().count("model.layers.0.mlp.experts.3.up_proj.weight"));
  const std::string name = "model.layers.0.mlp.experts.6.down_proj.weight";
  ASSERT_TRUE(shard.params().count(name));
  EXPECT_TRUE(at::equal(shard.params().at(name), full.params().at(name)));
  // Router and attention stay whole on every rank.
  EXPECT_TRUE(at::equal(shard.params().at("model.layers.0.mlp.gate.weight"),
                        full.params().at("model.layers.0.mlp.gate.weight")));

  const std::string dir = ::testing::TempDir() + "/ep_shard_full";
  remove_tree(dir);
  full.save(dir);
  Model loaded = load_model(dir, o);
  EXPECT_EQ(loaded.params().size(), shard.params().size());
  EXPECT_TRUE(at::equal(loaded.params().at(name), full.params().at(name)));

  o.ep_group = std::make_shared<testing::ShapeOnlyGroup>(0, 3, cfg.num_experts);
  EXPECT_THROW(init_random(cfg, 5, o), Error);  // 3 does not divide 8
}

// deepseek_v3 / qwen2_moe: routed experts are sharded; shared experts, the router, its
// selection bias (a buffer) and the shared-expert gate are replicated on every rank.
TEST(ExpertShards, SharedExpertsAndBuffersAreReplicated) {
  for (const char* arch : {"deepseek_v3", "qwen2_moe"}) {
    SCOPED_TRACE(arch);
    io::HfConfig cfg = testing::tiny_config(arch);
    Model full = init_random(cfg, 5);
    const std::string dir = ::testing::TempDir() + "/ep_shard_" + arch;
    remove_tree(dir);
    full.save(dir);
    const int64_t moe_layer = std::string(arch) == "deepseek_v3" ? 1 : 0;
    const std::string p = "model.layers." + std::to_string(moe_layer) + ".mlp.";
    for (int rank : {0, 1}) {
      ModelOptions o;
      o.ep_group = std::make_shared<testing::ShapeOnlyGroup>(rank, 2, cfg.num_experts);
      std::vector<Model> models;
      models.push_back(init_random(cfg, 5, o));
      models.push_back(load_model(dir, o));
      for (const Model& m : models) {
        for (int64_t e = 0; e < cfg.num_experts; ++e) {
          const bool mine = e / 4 == rank;
          EXPECT_EQ(m.params().count(p + "experts." + std::to_string(e) + ".up_proj.weight"), mine ? 1u : 0u);
        }
        for (const auto& [name, t] : full.state()) {
          if (name.find(".mlp.experts.") != std::string::npos) continue;
          const Params& where = full.buffers().count(name) ? m.buffers() : m.params();
          ASSERT_TRUE(where.count(name)) << name;
          EXPECT_TRUE(at::equal(where.at(name), t)) << name;
        }
      }
    }
  }
}

}  // namespace
}  // namespace moerl::model
