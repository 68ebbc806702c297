// tensor_io: at::Tensor round trips for every dtype, sharded checkpoints in the
// transformers layout, and clear errors for missing shards, tensors and wrong shapes.

#include "io/tensor_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/files.h"

namespace moerl::io {
namespace {

namespace fs = std::filesystem;

class TensorIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("moerl_io_" + std::to_string(::getpid()) + "_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    remove_tree(dir_);
    fs::create_directories(dir_);
    at::manual_seed(11);
  }
  void TearDown() override { remove_tree(dir_); }

  std::map<std::string, at::Tensor> sample() {
    std::map<std::string, at::Tensor> m;
    m["f32"] = at::randn({3, 4});
    m["bf16"] = at::randn({5}).to(at::kBFloat16);
    m["f16"] = at::randn({2, 3}).to(at::kHalf);
    m["i64"] = at::randint(-(1LL << 40), 1LL << 40, {4}, at::kLong);
    m["i32"] = at::randint(-100000, 100000, {2, 2}, at::kInt);
    m["u8"] = at::randint(0, 256, {7}, at::kByte);
    m["bool"] = at::randn({6}) > 0;
    m["scalar"] = at::randn({});
    m["empty"] = at::empty({0, 4});
    return m;
  }

  static void expect_same(const std::map<std::string, at::Tensor>& a,
                          const std::map<std::string, at::Tensor>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, t] : a) {
      ASSERT_TRUE(b.count(name)) << name;
      const at::Tensor& u = b.at(name);
      EXPECT_EQ(u.scalar_type(), t.scalar_type()) << name;
      EXPECT_EQ(u.sizes(), t.sizes()) << name;
      EXPECT_TRUE(at::equal(u, t.contiguous())) << name;
    }
  }

  fs::path dir_;
};

TEST_F(TensorIo, RoundTripEveryDtypeFileAndDir) {
  auto m = sample();
  save_tensors((dir_ / "one.safetensors").string(), m);
  expect_same(m, load_tensors((dir_ / "one.safetensors").string()));

  save_tensors((dir_ / "ckpt").string(), m);
  EXPECT_TRUE(fs::exists(dir_ / "ckpt" / "model.safetensors"));
  expect_same(m, load_tensors((dir_ / "ckpt").string()));
  SafetensorsFile f = SafetensorsFile::open((dir_ / "ckpt" / "model.safetensors").string());
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.info("bf16").dtype, DType::kBF16);
  EXPECT_EQ(f.info("bool").dtype, DType::kBool);
}

TEST_F(TensorIo, NonContiguousAndDoubleInput) {
  std::map<std::string, at::Tensor> m;
  at::Tensor base = at::randn({4, 6});
  m["t"] = base.t();                  // transposed view
  m["s"] = base.slice(1, 0, 6, 2);    // strided
  save_tensors((dir_ / "v.safetensors").string(), m);
  auto back = load_tensors((dir_ / "v.safetensors").string());
  EXPECT_TRUE(at::equal(back.at("t"), base.t()));
  EXPECT_TRUE(at::equal(back.at("s"), base.slice(1, 0, 6, 2)));

  std::map<std::string, at::Tensor> d = {{"w", at::randn({2}, at::kDouble)}};
  try {
    save_tensors((dir_ / "d.safetensors").string(), d);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
}

TEST_F(TensorIo, ShardedWriteAndRead) {
  std::map<std::string, at::Tensor> m;
  for (int i = 0; i < 6; ++i) m["layer." + std::to_string(i) + ".w"] = at::randn({64});  // 256 B
  m["big"] = at::randn({300});  // 1200 B, over the limit: gets a shard of its own
  const fs::path ckpt = dir_ / "sharded";
  save_tensors(ckpt.string(), m, /*max_shard_bytes=*/600);

  std::ifstream in(ckpt / "model.safetensors.index.json");
  ASSERT_TRUE(in.good());
  nlohmann::json index = nlohmann::json::parse(in);
  EXPECT_EQ(index["metadata"]["total_size"].get<int64_t>(), 6 * 256 + 1200);
  // Greedy in name order: [big] [layer.0, layer.1] [layer.2, layer.3] [layer.4, layer.5].
  EXPECT_EQ(index["weight_map"]["big"], "model-00001-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["layer.0.w"], "model-00002-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["layer.5.w"], "model-00004-of-00004.safetensors");
  for (int s = 1; s <= 4; ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-00004.safetensors", s);
    EXPECT_TRUE(fs::exists(ckpt / name)) << name;
  }
  EXPECT_FALSE(fs::exists(ckpt / "model.safetensors"));
  expect_same(m, load_tensors(ckpt.string()));

  // Re-saving unsharded removes the index (it would shadow the new file) and stale shards.
  save_tensors(ckpt.string(), m);
  EXPECT_FALSE(fs::exists(ckpt / "model.safetensors.index.json"));
  expect_same(m, load_tensors(ckpt.string()));
  // Re-sharding into fewer shards removes the earlier ones.
  save_tensors(ckpt.string(), m, 1300);
  EXPECT_FALSE(fs::exists(ckpt / "model-00004-of-00004.safetensors"));
  EXPECT_FALSE(fs::exists(ckpt / "model.safetensors"));
  expect_same(m, load_tensors(ckpt.string()));
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(TensorIo, ShardedErrors) {
  std::map<std::string, at::Tensor> m = {{"a", at::randn({100})}, {"b", at::randn({100})}};
  const fs::path ckpt = dir_ / "bad";
  save_tensors(ckpt.string(), m, 500);
  // The index lists a tensor its shard lacks.
  {
    std::ifstream in(ckpt / "model.safetensors.index.json");
    nlohmann::json index = nlohmann::json::parse(in);
    index["weight_map"]["ghost"] = "model-00001-of-00002.safetensors";
    std::ofstream(ckpt / "model.safetensors.index.json") << index.dump();
  }
  std::string e = error_of([&] { load_tensors(ckpt.string()); });
  EXPECT_NE(e.find("'ghost'"), std::string::npos) << e;
  EXPECT_NE(e.find("model-00001-of-00002.safetensors"), std::string::npos) << e;
  // A shard is missing.
  fs::remove(ckpt / "model-00001-of-00002.safetensors");
  e = error_of([&] { load_tensors(ckpt.string()); });
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
  // Path traversal in the index.
  std::ofstream(ckpt / "model.safetensors.index.json")
      << R"({"weight_map": {"a": "../x.safetensors"}})";
  e = error_of([&] { load_tensors(ckpt.string()); });
  EXPECT_NE(e.find("not a file inside"), std::string::npos) << e;
  // Broken index JSON.
  std::ofstream(ckpt / "model.safetensors.index.json") << "{";
  e = error_of([&] { load_tensors(ckpt.string()); });
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  // Empty directory and nonexistent path.
  fs::create_directories(dir_ / "emptydir");
  e = error_of([&] { load_tensors((dir_ / "emptydir").string()); });
  EXPECT_NE(e.find("has neither model.safetensors"), std::string::npos) << e;
  e = error_of([&] { load_tensors((dir_ / "nope").string()); });
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
}

TEST_F(TensorIo, TruncatedFileOnDisk) {
  save_tensors((dir_ / "t.safetensors").string(), {{"w", at::randn({64})}});
  fs::resize_file(dir_ / "t.safetensors", fs::file_size(dir_ / "t.safetensors") - 10);
  std::string e = error_of([&] { load_tensors((dir_ / "t.safetensors").string()); });
  EXPECT_NE(e.find("tensor 'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
}

// 64 MiB through save + load; prints throughput (the single-copy load path).
TEST_F(TensorIo, LargeRoundTripThroughput) {
  std::map<std::string, at::Tensor> m = {{"w", at::randn({16, 1 << 20})}};
  const std::string p = (dir_ / "big.safetensors").string();
  auto t0 = std::chrono::steady_clock::now();
  save_tensors(p, m);
  auto t1 = std::chrono::steady_clock::now();
  auto back = load_tensors(p);
  auto t2 = std::chrono::steady_clock::now();
  EXPECT_TRUE(at::equal(back.at("w"), m.at("w")));
  auto mbps = [](auto a, auto b) {
    return 64.0 / std::chrono::duration<double>(b - a).count();
  };
  std::printf("[ perf ] 64 MiB f32: save %.0f MiB/s (incl. fsync), load %.0f MiB/s\n",
              mbps(t0, t1), mbps(t1, t2));
}

TEST_F(TensorIo, RequireTensor) {
  std::map<std::string, at::Tensor> m = {{"model.layers.0.mlp.gate.weight", at::randn({4, 8})},
                                         {"model.norm.weight", at::randn({8})}};
  at::Tensor t = require_tensor(m, "model.norm.weight", {8});
  EXPECT_TRUE(at::equal(t, m.at("model.norm.weight")));
  std::string e = error_of([&] { require_tensor(m, "model.norm.weight", {16}); });
  EXPECT_NE(e.find("has shape [8], expected [16]"), std::string::npos) << e;
  EXPECT_NE(e.find("HINT"), std::string::npos) << e;
  e = error_of([&] { require_tensor(m, "model.layers.0.mlp.gate.wieght", {4, 8}); });
  EXPECT_NE(e.find("no tensor 'model.layers.0.mlp.gate.wieght'"), std::string::npos) << e;
  EXPECT_NE(e.find("model.layers.0.mlp.gate.weight"), std::string::npos) << e;  // suggestion
}

}  // namespace
}  // namespace moerl::io
