// Drain of a rollout worker PROCESS (`moerl rollout`, Redis queue): SIGTERM, or a Spot notice
// from a fake IMDSv2 endpoint, makes it hand back its unfinished tasks within the drain
// deadline and exit 0; another worker can lease them at once, also when the worker is in
// the middle of a generation far longer than the drain deadline; the same for a streaming
// worker ([rollout] streaming).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "base/deadline.h"
#include "base/files.h"
#include "model/tokenizer.h"
#include "rollout/group_rollout.h"
#include "rollout/weight_publisher.h"
#include "runtime/redis_server.h"
#include "runtime/test_metadata_server.h"
#include "store/object_store.h"
#include "job/roles.h"
#include "e2e/async_test_util.h"
#include "e2e/real_vocab_model.h"

namespace moerl::train {
using namespace moerl::job;  // NOLINT: the job API under test
namespace {

constexpr int kTasks = 300;
constexpr double kDrainSeconds = 4;

class AsyncDrain : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
    dir_ = testing::make_temp_dir("async-drain");
    server_ = std::make_unique<runtime::RedisServer>(
        runtime::RedisServer::start(dir_ + "/redis", Deadline::after_seconds(15)));
  }
  void TearDown() override {
    server_.reset();
    if (!dir_.empty()) remove_tree(dir_);
  }

  // Writes the config, publishes version 0 and enqueues kTasks prompt groups.
  JobConfig prepare(const std::string& extra, const std::vector<std::string>& overrides = {}) {
    std::string runtime = "mode = \"async\"\nqueue_url = \"" + server_->url() +
                          "\"\nnamespace = \"drain\"\ntasks_per_lease = 4\nlease_seconds = 60\n"
                          "drain_seconds = " + std::to_string(kDrainSeconds) + "\ndrain_margin_seconds = 0.5\n";
    config_ = testing::write_config(dir_, testing::tiny_config_text(runtime, extra, overrides));
    JobConfig cfg = JobConfig::load(config_, {});
    backends_ = runtime::open_backends(cfg.runtime, "test");
    auto tok = make_job_tokenizer(cfg);
    io::HfConfig arch = cfg.model.arch;
    arch.vocab_size = tok->vocab_size();
    arch.bos_token_id = tok->bos_id();
    arch.eos_token_id = tok->eos_id();
    arch.pad_token_id = tok->pad_id();
    model::Model m = cfg.model.init == "random" ? model::init_random(arch, 5) : model::load_model(cfg.model.init);
    store_ = store::open_store(job_store_uri(cfg, dir_));
    rollout::publish_weights(*store_, *backends_.weights, 0, m, dir_ + "/scratch", {}, Deadline::after_seconds(10));
    for (int c = 0; c < kTasks; ++c) {
      runtime::TaskUnit u = rollout::make_task_unit(cfg.task->item(tasks::Split::kTrain, c), *tok, 4, c);
      u.task_id = "c" + std::to_string(c);
      backends_.queue->enqueue(u, Deadline::after_seconds(5));
    }
    return cfg;
  }

  Subprocess start_worker() {
    return testing::spawn_moerl({"rollout", config_, "--run-dir", dir_, "--worker-id", "victim"}, dir_ + "/worker.log");
  }

  // Waits until the worker has put at least `n` records.
  void wait_for_progress(int n) {
    Deadline d = Deadline::after_seconds(120);
    while (!d.expired()) {
      runtime::QueueDepth q = backends_.queue->depth(Deadline::after_seconds(5));
      if (kTasks - q.queued() >= n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "worker made no progress; log: " << dir_ << "/worker.log";
  }

  // After the drain: nothing held, every task either done or ready for another worker now.
  void check_handed_back() {
    runtime::QueueDepth q = backends_.queue->depth(Deadline::after_seconds(5));
    EXPECT_EQ(q.leased, 0);
    EXPECT_GT(q.ready, 0);
    auto recs = backends_.buffer->take(kTasks, Deadline::after_seconds(2));
    EXPECT_EQ(static_cast<int64_t>(recs.size()) + q.ready, kTasks);
    double t0 = now_seconds();
    auto leases = backends_.queue->lease("other", 1, 60, Deadline::after_seconds(5));
    ASSERT_EQ(leases.size(), 1u);
    EXPECT_LT(now_seconds() - t0, 2.0);  // at once, not after a lease expiry
  }

  // Mid-run, `trigger` (SIGTERM, a Spot notice) makes the worker hand back its unfinished
  // tasks and exit 0 within the drain deadline.
  void drains_on(const std::function<void(Subprocess&)>& trigger, const std::string& extra = "",
                 const std::vector<std::string>& overrides = {}) {
    prepare(extra, overrides);
    Subprocess worker = start_worker();
    wait_for_progress(8);
    double t0 = now_seconds();
    trigger(worker);
    int code = testing::wait_exit(worker, kDrainSeconds + 10);
    double took = now_seconds() - t0;
    EXPECT_EQ(code, 0) << "log: " << dir_ << "/worker.log";
    EXPECT_LT(took, kDrainSeconds + 3);
    check_handed_back();
  }

  // A batch far longer than the drain deadline (answers of 3000 tokens over the real Qwen3
  // vocabulary, which a random model does not end early: about a minute here) is abandoned
  // when the drain deadline arrives, not finished: the worker exits within the deadline and
  // every task is back in the queue.
  void long_generation_abandoned(std::vector<std::string> overrides) {
    const std::string model = e2e::real_vocab_model(dir_, 4096);
    ASSERT_FALSE(HasFailure());
    overrides.insert(overrides.end(), {"model.init=\"" + model + "\"", "rollout.max_new_tokens=3000"});
    prepare("", overrides);
    Subprocess worker = start_worker();
    Deadline leased = Deadline::after_seconds(120);
    while (!leased.expired() && backends_.queue->depth(Deadline::after_seconds(5)).leased == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_FALSE(leased.expired()) << "the worker never leased a task\n" << testing::log_tail(dir_ + "/worker.log");
    std::this_thread::sleep_for(std::chrono::seconds(1));  // into its first batch
    const double t0 = now_seconds();
    worker.signal(SIGTERM);
    const int code = testing::wait_exit(worker, kDrainSeconds + 60);
    const double took = now_seconds() - t0;
    EXPECT_EQ(code, 0) << testing::log_tail(dir_ + "/worker.log");
    EXPECT_LT(took, kDrainSeconds + 3) << "the batch outlived the drain\n" << testing::log_tail(dir_ + "/worker.log");
    EXPECT_NE(testing::read_text(dir_ + "/worker.log").find("drain deadline reached"), std::string::npos)
        << testing::log_tail(dir_ + "/worker.log");
    check_handed_back();
  }

  std::string dir_, config_;
  std::unique_ptr<runtime::RedisServer> server_;
  runtime::RuntimeBackends backends_;
  std::unique_ptr<store::ObjectStore> store_;
};

// The streaming worker ([rollout] streaming): rows fed from the queue as they free up.
const std::vector<std::string> kStreaming = {"rollout.streaming=true", "rollout.batch_rows=8"};

void sigterm(Subprocess& worker) { worker.signal(SIGTERM); }

TEST_F(AsyncDrain, SigtermHandsBackUnfinishedTasksAndExitsZero) { drains_on(sigterm); }
TEST_F(AsyncDrain, AStreamingWorkerDrainsTheSameWay) { drains_on(sigterm, "", kStreaming); }

TEST_F(AsyncDrain, SpotNoticeTriggersTheSameDrain) {
  runtime::FakeMetadataServer imds;
  drains_on([&](Subprocess&) { imds.set_notice(true); },
            "[runtime.spot]\nenabled = true\nmetadata_url = \"" + imds.url() + "\"\npoll_seconds = 0.2\n");
}

TEST_F(AsyncDrain, ALongGenerationIsAbandonedAtTheDrainDeadline) { long_generation_abandoned({}); }
TEST_F(AsyncDrain, AStreamingWorkersLongGenerationIsAbandonedTheSameWay) { long_generation_abandoned(kStreaming); }

}  // namespace
}  // namespace moerl::train
