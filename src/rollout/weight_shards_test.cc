// Sharded weight versions (a trainer group's: one shard per rank plus an index) read by an
// expert-parallel rank: it fetches only the shards holding its tensors and loads exactly the
// dense tensors and its own experts; a reader of everything gets the whole model back.
#include <gtest/gtest.h>

#include <filesystem>

#include "base/files.h"
#include "io/tensor_io.h"
#include "model/expert_names.h"
#include "model/sharded_files.h"
#include "model/test_util.h"
#include "rollout/weight_publisher.h"
#include "store/commit.h"
#include "store/local_store.h"

namespace moerl::rollout {
namespace {

namespace fs = std::filesystem;


// Commits `m` as a 2-shard version the way a trainer group of 2 writes it: experts 0-3 with
// the dense tensors in shard 1, experts 4-7 in shard 2.
void commit_two_shards(store::ObjectStore& store, const model::Model& m, const std::string& dir) {
  std::map<std::string, at::Tensor> s1, s2;
  for (const auto& [name, t] : m.state()) {
    const std::optional<int64_t> e = model::routed_expert_index(name);
    (e && *e >= 4 ? s2 : s1)[name] = t;
  }
  store::CommitWriter w(store, weights_prefix(7));
  std::vector<nlohmann::json> shards;
  for (int r = 0; r < 2; ++r) {
    const auto& part = r == 0 ? s1 : s2;
    const std::string file = model::shard_file_name("model", r, 2);
    io::save_tensors(dir + "/" + file, part);
    w.put_file(file, dir + "/" + file);
    nlohmann::json names = nlohmann::json::array();
    for (const auto& [n, t] : part) names.push_back(n);
    shards.push_back({{"file", file}, {"names", names}, {"bytes", 0}});
  }
  w.put_bytes(model::kShardIndexFile, model::shard_index_json(shards));
  model::write_model_config(m, dir);
  w.put_file("config.json", dir + "/config.json");
  w.commit({{"version", 7}, {"kind", "policy-weights"}});
}

TEST(WeightShards, AnExpertParallelRankFetchesAndLoadsOnlyItsTensors) {
  ScratchDir tmp("weight-shards");
  store::LocalStore store(tmp.path() + "/store");
  const model::Model m = model::init_random(model::testing::tiny_qwen3(), 5);
  fs::create_directories(tmp.path() + "/w");
  commit_two_shards(store, m, tmp.path() + "/w");

  const TensorFilter rank1 = local_tensors(model::testing::ShapeOnlyGroup(1, 2, 8));
  StagedWeights got = fetch_weights(store, weights_prefix(7), tmp.path() + "/rank1", rank1);
  EXPECT_EQ(got.version, 7u);
  size_t want = 0;
  for (const auto& [name, t] : m.state()) {
    const std::optional<int64_t> e = model::routed_expert_index(name);
    const bool mine = !e || *e >= 4;
    EXPECT_EQ(got.params.count(name), mine ? 1u : 0u) << name;
    if (mine) {
      ++want;
      EXPECT_TRUE(at::equal(got.params.at(name), t)) << name;
    }
  }
  EXPECT_EQ(got.params.size(), want);
  // Both shards were needed (dense tensors live in shard 1); rank 0's reader needs shard 1 only.
  EXPECT_TRUE(fs::exists(got.dir + "/" + model::shard_file_name("model", 1, 2)));
  StagedWeights r0 = fetch_weights(store, weights_prefix(7), tmp.path() + "/rank0",
                                   local_tensors(model::testing::ShapeOnlyGroup(0, 2, 8)));
  EXPECT_FALSE(fs::exists(r0.dir + "/" + model::shard_file_name("model", 1, 2)))
      << "rank 0 fetched the shard of experts it does not hold";
  // The fetched copy is a model directory an EP rank loads (only its experts), and a reader
  // without a filter gets every tensor.
  StagedWeights all = fetch_weights(store, weights_prefix(7), tmp.path() + "/all");
  EXPECT_EQ(all.params.size(), m.state().size());
  model::Model back = model::load_model(all.dir);
  for (const auto& [name, t] : m.state()) EXPECT_TRUE(at::equal(back.state().at(name), t)) << name;
}

TEST(WeightShards, LocalTensorsSplitTheExpertsByRank) {
  using model::testing::ShapeOnlyGroup;
  const TensorFilter r0 = local_tensors(ShapeOnlyGroup(0, 4, 8)), r3 = local_tensors(ShapeOnlyGroup(3, 4, 8));
  EXPECT_TRUE(r0("model.layers.0.mlp.experts.1.up_proj.weight"));
  EXPECT_FALSE(r0("model.layers.0.mlp.experts.2.up_proj.weight"));
  EXPECT_TRUE(r3("model.layers.0.mlp.experts.7.down_proj.weight"));
  EXPECT_TRUE(r3("model.layers.0.block_sparse_moe.experts.6.w1.weight"));  // Mixtral's names
  EXPECT_FALSE(r3("model.layers.0.block_sparse_moe.experts.0.w1.weight"));
  for (const TensorFilter& f : {r0, r3}) {  // dense tensors: every rank
    EXPECT_TRUE(f("model.embed_tokens.weight"));
    EXPECT_TRUE(f("model.layers.0.mlp.gate.weight"));
    EXPECT_TRUE(f("model.layers.0.mlp.shared_experts.up_proj.weight"));
    EXPECT_TRUE(f("model.layers.0.mlp.shared_expert.up_proj.weight"));
  }
}

}  // namespace
}  // namespace moerl::rollout
