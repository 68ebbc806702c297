// Weight publication: round trip with checksums verified, retention, a late joiner starting
// from the newest version, and a worker that never mixes versions within a generate() batch.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include "base/error.h"
#include "base/files.h"
#include "model/tokenizer.h"
#include "rollout/weight_publisher.h"
#include "rollout/worker.h"
#include "runtime/in_process_queue.h"
#include "store/commit.h"
#include "store/object_store.h"
#include "job/roles.h"
#include "e2e/async_test_util.h"

namespace moerl::train {
using namespace moerl::job;  // NOLINT: the job API under test
namespace {

struct Fixture {
  std::string dir;
  JobConfig cfg;
  std::unique_ptr<model::Tokenizer> tok;
  std::unique_ptr<model::Model> policy;
  std::unique_ptr<store::ObjectStore> store;

  explicit Fixture(const std::string& runtime_lines) {
    dir = testing::make_temp_dir("async-weights");
    cfg = JobConfig::load(testing::write_config(dir, testing::tiny_config_text(runtime_lines)), {});
    tok = make_job_tokenizer(cfg);
    io::HfConfig arch = cfg.model.arch;
    arch.vocab_size = tok->vocab_size();
    arch.bos_token_id = tok->bos_id();
    arch.eos_token_id = tok->eos_id();
    arch.pad_token_id = tok->pad_id();
    policy = std::make_unique<model::Model>(model::init_random(arch, 11));
    store = store::open_store(dir + "/store");
  }
  ~Fixture() { remove_tree(dir); }
  // Moves every parameter by a random step: a new "version" of the policy.
  void perturb(uint64_t seed) {
    at::NoGradGuard g;
    at::manual_seed(static_cast<int64_t>(seed));
    for (const auto& [name, p] : policy->params()) p.add_(at::randn_like(p) * 0.01);
  }
};

TEST(AsyncWeights, PublishFetchRoundTripAndChecksum) {
  Fixture f("mode = \"async\"");
  runtime::InProcessWeightRegistry reg;
  std::string prefix = rollout::publish_weights(*f.store, reg, 0, *f.policy, f.dir + "/scratch", {}, Deadline::after_seconds(5));
  EXPECT_EQ(prefix, "weights/v00000000");
  ASSERT_TRUE(reg.latest(Deadline::after_seconds(1)).has_value());
  EXPECT_EQ(reg.latest(Deadline::after_seconds(1))->location, prefix);
  rollout::StagedWeights w = rollout::fetch_weights(*f.store, prefix, f.dir + "/fetch");
  EXPECT_EQ(w.version, 0u);
  ASSERT_EQ(w.params.size(), f.policy->params().size());
  for (const auto& [name, p] : f.policy->params()) {
    ASSERT_TRUE(w.params.count(name)) << name;
    EXPECT_TRUE(at::equal(w.params.at(name), p.detach())) << name;
  }
  // Flip one byte of the shard (same size): the sha256 check must reject it.
  std::string key = prefix + "/model.safetensors";
  std::string bytes = f.store->get(key);
  bytes[bytes.size() / 2] ^= 0x5a;
  f.store->put(key, bytes);
  EXPECT_THROW(rollout::fetch_weights(*f.store, prefix, f.dir + "/fetch2"), Error);
}

TEST(AsyncWeights, RetentionKeepsNewestAndLateJoinerStartsThere) {
  Fixture f("mode = \"async\"\ntasks_per_lease = 2");
  runtime::RuntimeBackends b = runtime::open_backends(f.cfg.runtime);
  for (uint64_t v = 0; v < 4; ++v) {
    f.perturb(v + 1);
    rollout::publish_weights(*f.store, *b.weights, v, *f.policy, f.dir + "/scratch", {.keep = 2},
                             Deadline::after_seconds(5));
  }
  std::vector<std::string> commits = store::list_commits(*f.store, rollout::kWeightsRoot);
  ASSERT_EQ(commits.size(), 2u);
  EXPECT_EQ(commits[0], "weights/v00000002");
  EXPECT_EQ(commits[1], "weights/v00000003");
  for (uint64_t c = 0; c < 2; ++c) {
    runtime::TaskUnit u = rollout::make_task_unit(f.cfg.task->item(tasks::Split::kTrain, c), *f.tok, 4, c);
    u.task_id = "c" + std::to_string(c);
    b.queue->enqueue(u, Deadline::after_seconds(1));
  }
  rollout::WorkerSetup s{.tokenizer = f.tok.get(), .reward = f.cfg.reward.get(), .gen = f.cfg.rollout.gen,
                         .runtime = f.cfg.runtime, .seed = 1};
  rollout::RolloutWorker w(s, b, *f.store, {.worker_id = "late", .scratch_dir = f.dir + "/w", .max_tasks = 2});
  runtime::DrainController drain(30);
  rollout::WorkerStats st = w.run(drain);
  EXPECT_EQ(st.first_version, 3u);
  EXPECT_EQ(st.loop.completed, 2);
  EXPECT_EQ(st.batches, 1);  // both leased tasks generated in one call
  auto recs = b.buffer->take(2, Deadline::after_seconds(2));
  ASSERT_EQ(recs.size(), 2u);
  for (const auto& r : recs) {
    EXPECT_EQ(r.worker_id, "late");
    ASSERT_EQ(r.samples.size(), 4u);
    for (const auto& smp : r.samples) {
      ASSERT_EQ(smp.version_spans.size(), 1u);
      EXPECT_EQ(smp.version_spans[0].version, 3u);
    }
  }
}

// A trainer froze mid-publication of v3 (one shard written, no manifest) and was replaced:
// the successor must not write v3 too (the woken predecessor would finish its manifest over
// the successor's shards, or refuse the successor's as different content); it takes v4, and
// the predecessor's late v3 commits without touching v4 and is not announced.
TEST(AsyncWeights, SuccessorNeverWritesAVersionAFrozenPredecessorBegan) {
  Fixture f("mode = \"async\"");
  runtime::InProcessWeightRegistry reg;
  const Deadline d = Deadline::after_seconds(10);
  rollout::VersionPublisher first(*f.store, reg, nullptr, f.dir + "/a", {});
  EXPECT_EQ(first.publish(2, *f.policy, d), 2u);
  f.store->put(rollout::weights_prefix(3) + "/config.json", "{}");  // v3 begun, then frozen
  f.perturb(5);
  rollout::VersionPublisher successor(*f.store, reg, nullptr, f.dir + "/b", {});
  EXPECT_EQ(successor.publish(0, *f.policy, d), 4u);
  const at::Tensor ours = f.policy->params().begin()->second.detach().clone();
  f.perturb(6);
  // The woken one finishes its commit; the registry refuses the announcement (not newer).
  EXPECT_THROW(rollout::publish_weights(*f.store, reg, 3, *f.policy, f.dir + "/a", {}, d), Error);
  EXPECT_EQ(reg.latest(d)->version, 4u);
  rollout::StagedWeights v4 = rollout::fetch_weights(*f.store, rollout::weights_prefix(4), f.dir + "/fetch");
  EXPECT_TRUE(at::equal(v4.params.at(f.policy->params().begin()->first), ours));
  EXPECT_EQ(successor.publish(5, *f.policy, d), 5u);
}

// Versions 0, 1, 2 through an in-memory handoff that keeps 2: the oldest is gone, the others
// hold the policy as it was when put (later updates do not reach them), and versions must rise.
TEST(AsyncWeights, InMemoryHandoffKeepsNewestSnapshots) {
  Fixture f("mode = \"async\"");
  rollout::WeightHandoff h(2);
  std::vector<model::Params> expected;
  for (uint64_t v = 0; v < 3; ++v) {
    if (v > 0) f.perturb(v);
    EXPECT_EQ(h.put(v, *f.policy), "memory:v" + std::to_string(v));
    model::Params copy;
    for (const auto& [name, p] : f.policy->params()) copy.emplace(name, p.detach().clone());
    expected.push_back(std::move(copy));
  }
  f.perturb(99);
  EXPECT_EQ(h.get("memory:v0"), nullptr);
  EXPECT_EQ(h.get("weights/v00000002"), nullptr);  // a store location is not the handoff's
  for (uint64_t v = 1; v < 3; ++v) {
    auto snap = h.get("memory:v" + std::to_string(v));
    ASSERT_NE(snap, nullptr);
    EXPECT_EQ(snap->version, v);
    ASSERT_EQ(snap->params.size(), expected[v].size());
    for (const auto& [name, t] : expected[v]) EXPECT_TRUE(at::equal(snap->params.at(name), t)) << name;
  }
  EXPECT_THROW(h.put(2, *f.policy), Error);
}

// A worker generating while a "trainer" publishes new versions, through the object store or
// the in-memory handoff: every batch carries one version, versions never go back.
void expect_worker_never_mixes_versions(bool in_memory) {
  Fixture f("mode = \"async\"\ntasks_per_lease = 3");
  runtime::RuntimeBackends b = runtime::open_backends(f.cfg.runtime);
  auto handoff = in_memory ? std::make_shared<rollout::WeightHandoff>() : nullptr;
  auto publish = [&](uint64_t v) {
    if (handoff) {
      b.weights->publish(v, handoff->put(v, *f.policy), Deadline::after_seconds(5));
    } else {
      rollout::publish_weights(*f.store, *b.weights, v, *f.policy, f.dir + "/scratch", {.keep = 3},
                               Deadline::after_seconds(5));
    }
  };
  publish(0);
  const int kTasks = 30;  // 10 waves of 3 tasks = one lease batch each
  auto enqueue_wave = [&](int wave) {
    for (int c = wave * 3; c < wave * 3 + 3; ++c) {
      runtime::TaskUnit u = rollout::make_task_unit(f.cfg.task->item(tasks::Split::kTrain, c), *f.tok, 4, c);
      u.task_id = "c" + std::to_string(c);
      b.queue->enqueue(u, Deadline::after_seconds(1));
    }
  };
  // A "trainer" publishing a new version after each wave is done, while the worker idles or
  // generates; it waits a little before the next wave so the version can be staged.
  std::atomic<bool> stop{false};
  std::thread pub([&] {
    for (int wave = 0; wave < kTasks / 3 && !stop.load(); ++wave) {
      enqueue_wave(wave);
      Deadline d = Deadline::after_seconds(30);
      while (!d.expired() && b.queue->depth(Deadline::after_seconds(1)).queued() > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      if (wave % 2 == 0) {
        f.perturb(100 + wave);
        publish(static_cast<uint64_t>(wave / 2 + 1));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
      }
    }
  });
  rollout::WorkerSetup s{.tokenizer = f.tok.get(), .reward = f.cfg.reward.get(), .gen = f.cfg.rollout.gen,
                         .runtime = f.cfg.runtime, .seed = 2};
  rollout::WorkerOptions wo{.worker_id = "w", .scratch_dir = f.dir + "/w", .max_tasks = kTasks, .handoff = handoff};
  rollout::RolloutWorker w(s, b, *f.store, wo);
  runtime::DrainController drain(30);
  rollout::WorkerStats st = w.run(drain);
  stop = true;
  pub.join();
  EXPECT_EQ(st.loop.completed, kTasks);
  // NOTE: a lease can return fewer than 3 tasks while a wave is still being enqueued, so the
  // number of batches (generate() calls) is at least kTasks / 3, not exactly.
  EXPECT_GE(st.batches, kTasks / 3);
  EXPECT_GE(st.activations, 3);  // it did switch versions along the way
  auto recs = b.buffer->take(kTasks, Deadline::after_seconds(2));
  ASSERT_EQ(recs.size(), static_cast<size_t>(kTasks));
  // Records arrive in completion order; each batch of 3 consecutive tasks is one generate()
  // call and must carry exactly one version; versions never go back.
  uint64_t prev = 0;
  std::set<uint64_t> seen;
  for (size_t i = 0; i < recs.size(); ++i) {
    uint64_t v = recs[i].samples.at(0).version_spans.at(0).version;
    for (const auto& smp : recs[i].samples) {
      ASSERT_EQ(smp.version_spans.size(), 1u);
      EXPECT_EQ(smp.version_spans[0].version, v);
    }
    if (st.batches == kTasks / 3) {  // full batches of 3: each batch carries one version
      EXPECT_EQ(v, recs[i - i % 3].samples[0].version_spans[0].version) << "task " << i;
    }
    EXPECT_GE(v, prev);
    prev = v;
    seen.insert(v);
  }
  EXPECT_GE(seen.size(), 4u);
}

TEST(AsyncWeights, WorkerNeverMixesVersionsWithinABatch) { expect_worker_never_mixes_versions(false); }

TEST(AsyncWeights, WorkerNeverMixesVersionsWithinABatchInMemory) { expect_worker_never_mixes_versions(true); }

}  // namespace
}  // namespace moerl::train
