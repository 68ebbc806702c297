// Poison experience records pushed with XADD into a running async job's experience stream,
// beside the workers' real ones: an out-of-vocabulary token id, a NaN logprob, logprobs and
// tokens of different lengths, a bad CRC, and a NaN record claiming a real task of the run.
// The trainer must not crash: it quarantines each (NS:experience:quarantine, reason + bytes),
// counts them (records_quarantined), re-creates the real task it refused, and the run ends
// with every task trained once and nothing lost.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "e2e/async_test_util.h"
#include "runtime/byte_codec.h"
#include "runtime/redis_client.h"
#include "runtime/redis_server.h"

namespace moerl::train {
namespace {

using runtime::ExperienceRecord;

constexpr uint32_t kGroup = 4;  // the tiny job's group size

// A sane record of kGroup samples for `task_id` (version 0, small token ids).
ExperienceRecord sane(const std::string& task_id) {
  ExperienceRecord r;
  r.task_id = task_id;
  r.worker_id = "xadd";
  for (uint32_t g = 0; g < kGroup; ++g) {
    runtime::Sample s;
    s.prompt_tokens = {5, 6, 7};
    s.response_tokens = {8, 9, 10};
    s.behaviour_logprobs = {-0.5f, -1.0f, -2.0f};
    s.reward = 0.25f * static_cast<float>(g);
    s.version_spans = {{0, 0}};
    r.samples.push_back(std::move(s));
  }
  return r;
}

// A version-2 record whose sample 0 has 3 response tokens and 2 logprobs: the format's own
// validation refuses it, so encode_experience cannot write it; framed with a correct CRC.
std::string mismatched_lengths(const std::string& task_id) {
  runtime::ByteWriter w;
  w.put_string(task_id);
  w.put<uint32_t>(0);
  w.put_string("xadd");
  w.put<uint64_t>(0);
  w.put<int64_t>(0);
  w.put<int64_t>(0);
  w.put<double>(0);
  w.put<double>(0);
  w.put<uint32_t>(kGroup);
  for (uint32_t g = 0; g < kGroup; ++g) {
    w.put_vector(std::vector<int32_t>{5, 6, 7});
    w.put_vector(std::vector<int32_t>{8, 9, 10});
    w.put_vector(g == 0 ? std::vector<float>{-0.5f, -1.0f} : std::vector<float>{-0.5f, -1.0f, -2.0f});
    w.put<float>(0);
    w.put<uint32_t>(1);
    w.put<uint32_t>(0);
    w.put<uint64_t>(0);
    w.put<uint8_t>(0);
    w.put<double>(0);
    w.put<uint16_t>(0);
    w.put<uint16_t>(0);
    w.put<uint8_t>(1);
    w.put_vector(std::vector<uint8_t>{});
  }
  const char magic[4] = {'M', 'R', 'E', 'X'};
  return runtime::frame_record(magic, runtime::kExperienceRecordVersion, w.bytes());
}

TEST(AsyncPoison, CraftedRecordsAreQuarantinedCountedAndTheRunCompletes) {
  if (testing::moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  std::string dir = testing::make_temp_dir("async-poison");
  runtime::RedisServer server = runtime::RedisServer::start(dir + "/redis", Deadline::after_seconds(15));
  const int kSteps = 30, kPrompts = 4;  // long enough that the poison lands mid-run
  const std::string runtime = testing::async_runtime_text(server.url(), "poison");
  std::string config = testing::write_config(
      dir, testing::tiny_config_text(runtime, "",
                                     {"rollout.prompts_per_step=" + std::to_string(kPrompts),
                                      "train.steps=" + std::to_string(kSteps), "train.threads=1"}));
  std::string run = dir + "/run";
  std::string log = dir + "/log";
  std::filesystem::create_directories(log);
  Subprocess trainer = testing::spawn_moerl({"trainer", config, "--run-dir", run, "--no-plot"}, log + "/trainer.log");
  Subprocess worker =
      testing::spawn_moerl({"rollout", config, "--run-dir", run, "--worker-id", "w0"}, log + "/w0.log");

  // Once the trainer trains (its group exists and it is reading), push the poison.
  for (Deadline d = Deadline::after_seconds(240); testing::rl_steps_done(run + "/metrics.jsonl") < 1;) {
    int code = 0;
    ASSERT_FALSE(testing::exited(trainer, &code)) << "trainer exited " << code << " early; logs in " << log;
    ASSERT_FALSE(d.expired()) << "no RL step within 240 s; logs in " << log;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  runtime::RedisClient redis(runtime::parse_redis_url(server.url()));
  auto xadd = [&](const std::string& bytes, const std::string& key) {
    redis.command_ok({"XADD", "poison:experience", "*", "rec", bytes, "key", key}, Deadline::after_seconds(10));
  };
  ExperienceRecord oov = sane("poison-oov");
  oov.samples[1].response_tokens[2] = 1000000;
  xadd(runtime::encode_experience(oov), "poison-oov#0");
  ExperienceRecord nan = sane("poison-nan");
  nan.samples[2].behaviour_logprobs[0] = NAN;
  xadd(runtime::encode_experience(nan), "poison-nan#0");
  xadd(mismatched_lengths("poison-len"), "poison-len#0");
  std::string crc = runtime::encode_experience(sane("poison-crc"));
  crc[crc.size() - 9] ^= 0x40;  // a payload byte: the header's CRC no longer matches
  xadd(crc, "poison-crc#0");
  // A real task of the run, the newest created (most likely not trained yet): refused, it
  // must be re-created (attempt 1), and the worker's own attempt-0 record must not train too.
  const std::string next = redis.command_ok({"GET", "poison:tasks:cursor"}, Deadline::after_seconds(10)).str;
  ASSERT_FALSE(next.empty());
  const std::string real = "c" + std::to_string(std::stoull(next) - 1);
  ExperienceRecord claim = sane(real);
  claim.samples[0].behaviour_logprobs[1] = NAN;
  xadd(runtime::encode_experience(claim), real + "#0");
  const int kPushed = 5;
  const int64_t steps_at_push = testing::rl_steps_done(run + "/metrics.jsonl");

  ASSERT_EQ(testing::wait_exit(trainer, 300), 0) << "trainer failed or hung; logs in " << log;
  EXPECT_EQ(testing::wait_exit(worker, 60), 0) << "worker did not drain; logs in " << log;
  ASSERT_LT(steps_at_push, kSteps - 5) << "the run was nearly over when the poison was pushed: make it longer";

  std::ifstream sin(run + "/summary.json");
  nlohmann::json summary = nlohmann::json::parse(sin);
  const nlohmann::json& acc = summary.at("accounting");
  EXPECT_EQ(acc.at("records_quarantined").get<int64_t>(), kPushed) << acc.dump();
  EXPECT_EQ(acc.at("lost").get<int64_t>(), 0) << acc.dump();
  EXPECT_EQ(acc.at("tasks_abandoned").get<int64_t>(), 0) << acc.dump();
  // A group dropped as stale (a busy box can leave the worker's staging thread versions
  // behind) is replaced by a fresh task, so the run still trains kSteps * kPrompts groups.
  const int64_t stale = acc.at("stale_dropped").get<int64_t>();
  std::printf("poison: %lld group(s) dropped as stale\n", static_cast<long long>(stale));
  EXPECT_EQ(acc.at("tasks_created").get<int64_t>(), kSteps * kPrompts + stale) << acc.dump();
  EXPECT_EQ(summary.at("steps").at("rl").get<int64_t>(), kSteps);
  int64_t last_row = -1;
  std::ifstream min(run + "/metrics.jsonl");
  for (std::string line; std::getline(min, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("phase", "") == "rl") last_row = j.value("records_quarantined", int64_t{-1});
  }
  EXPECT_EQ(last_row, kPushed) << "metrics rows carry records_quarantined";

  // Every task trained once, none of the poison.
  std::set<uint64_t> cursors;
  std::ifstream tin(run + "/trained.jsonl");
  for (std::string line; std::getline(tin, line);) {
    if (line.empty()) continue;
    nlohmann::json t = nlohmann::json::parse(line);
    EXPECT_TRUE(cursors.insert(t.at("cursor").get<uint64_t>()).second) << "trained twice: " << line;
    EXPECT_NE(t.at("worker").get<std::string>(), "xadd") << "poison trained: " << line;
  }
  EXPECT_EQ(cursors.size(), static_cast<size_t>(kSteps * kPrompts));

  // The dead-letter stream holds each with its reason and bytes; the experience stream not.
  runtime::RedisReply q = redis.command_ok({"XRANGE", "poison:experience:quarantine", "-", "+"}, Deadline::after_seconds(10));
  ASSERT_EQ(q.elements.size(), static_cast<size_t>(kPushed));
  std::map<std::string, std::string> reasons;
  for (const runtime::RedisReply& e : q.elements) {
    std::map<std::string, std::string> f;
    const auto& kv = e.elements.at(1).elements;
    for (size_t i = 0; i + 1 < kv.size(); i += 2) f[kv[i].str] = kv[i + 1].str;
    reasons[f["key"]] = f["reason"];
    EXPECT_FALSE(f["rec"].empty());
    EXPECT_FALSE(f["id"].empty());
  }
  EXPECT_NE(reasons["poison-oov#0"].find("response token 2 is id 1000000, outside the vocabulary"), std::string::npos)
      << reasons["poison-oov#0"];
  EXPECT_NE(reasons["poison-nan#0"].find("sample 2: behaviour logprob of response token 0 is nan"), std::string::npos)
      << reasons["poison-nan#0"];
  EXPECT_NE(reasons["poison-len#0"].find("2 behaviour logprobs for 3 response tokens"), std::string::npos)
      << reasons["poison-len#0"];
  EXPECT_NE(reasons["poison-crc#0"].find("checksum mismatch"), std::string::npos) << reasons["poison-crc#0"];
  EXPECT_NE(reasons[real + "#0"].find("behaviour logprob"), std::string::npos) << reasons[real + "#0"];
  const std::string trainer_log = testing::read_text(log + "/trainer.log");
  EXPECT_NE(trainer_log.find("(task poison-oov#0) quarantined to poison:experience:quarantine"), std::string::npos);
  // The claim on a real task either came first (the task is enqueued again, attempt 1, and
  // the worker's attempt 0 is dropped as a duplicate) or after that task was trained.
  const bool recreated = trainer_log.find("task " + real + " is enqueued again (attempt 1)") != std::string::npos;
  std::printf("poison: claim on %s %s\n", real.c_str(), recreated ? "re-created the task" : "came after it was trained");
  if (recreated) {
    EXPECT_GE(acc.at("tasks_requeued").get<int64_t>(), 1) << acc.dump();
    EXPECT_GE(acc.at("duplicates_dropped").get<int64_t>(), 1) << "the worker's own " << real << "#0";
  }
  remove_tree(dir);
}

}  // namespace
}  // namespace moerl::train
