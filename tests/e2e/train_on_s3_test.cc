// `moerl train` with its store on S3 (the S3 test server on loopback), end to end through the
// moerl binary (MOERL_BIN): a sync job stopped after RL step 3 leaves a committed checkpoint in
// the bucket (listed and read back by the AWS CLI), and the rerun resumes from it and ends on
// the same loss curve as an uninterrupted run on a local store; an async job (Redis queue,
// rollout worker processes) publishes weight versions there, is SIGKILLed after its first
// checkpoint and the rerun resumes from S3 and finishes with nothing lost.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "base/subprocess.h"
#include "runtime/redis_server.h"
#include "e2e/tiny_job.h"
#include "store/commit.h"
#include "store/testing/s3_env.h"
#include "store/testing/test_util.h"

namespace moerl::store {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// The tiny-job preset (e2e/tiny_job.h): fewer SFT steps and eval prompts for the sync run;
// its async variant with two workers, 8 steps and a checkpoint every 2 for the async one.
const std::vector<std::string> kSyncJob = {"train.sft_steps=10", "train.eval_prompts=8"};
const std::vector<std::string> kAsyncJob = e2e::plus(
    e2e::kAsyncTiny, {"rollout.num_workers=2", "train.steps=8", "train.checkpoint_every=2", "train.eval_prompts=8",
                      "train.threads=1"});

using Env = std::vector<std::pair<std::string, std::string>>;

// Environment of every child: the S3 test server as the endpoint, its dummy key pair, no IMDS.
Env s3_env(const testing::S3TestServer& s) {
  return {{"AWS_ACCESS_KEY_ID", testing::S3TestServer::kKey},
          {"AWS_SECRET_ACCESS_KEY", testing::S3TestServer::kKey},
          {"AWS_REGION", "us-east-1"},
          {"AWS_ENDPOINT_URL_S3", s.endpoint()},
          {"AWS_EC2_METADATA_DISABLED", "true"},
          {"AWS_CONFIG_FILE", "/dev/null"},
          {"AWS_SHARED_CREDENTIALS_FILE", "/dev/null"},
          {"AWS_REQUEST_CHECKSUM_CALCULATION", "when_required"},
          {"AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required"},
          {"OMP_NUM_THREADS", "1"}};
}

// Starts argv with extra env, stdout+stderr appended to `log`; dies with the test.
Subprocess spawn(const std::vector<std::string>& argv, const Env& env, const std::string& log) {
  return Subprocess::spawn(argv, {.stdout_to = Redirect::file(log, FileMode::kAppend),
                                  .stderr_to = Redirect::to_stdout(),
                                  .set_env = env,
                                  .unset_env = {"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"},
                                  .parent_death_signal = SIGKILL});
}

// Exit status (exit code, or 128 + signal); -1 (after SIGKILL) when still running at the deadline.
int run(const std::vector<std::string>& argv, const Env& env, const std::string& log, double seconds) {
  return spawn(argv, env, log).wait_or_kill(Deadline::after_seconds(seconds)).value_or(-1);
}

std::string tail(const std::string& path) {
  std::string s = fs::exists(path) ? testing::read_file(path) : "";
  return s.size() > 4000 ? s.substr(s.size() - 4000) : s;
}

// Keys under s3://moerl-test/<prefix>/ with their sizes, as the AWS CLI lists them.
std::map<std::string, int64_t> aws_list(const testing::S3TestServer& s, const std::string& prefix, const TempDir& tmp) {
  std::string out = tmp.file("list.json");
  fs::remove(out);
  int rc = run({"aws", "--endpoint-url", s.endpoint(), "--region", "us-east-1", "--output", "json", "s3api",
                "list-objects-v2", "--bucket", testing::S3TestServer::kBucket, "--prefix", prefix + "/"},
               s3_env(s), out, 60);
  EXPECT_EQ(rc, 0) << tail(out);
  std::map<std::string, int64_t> keys;
  if (rc != 0) return keys;
  std::string text = testing::read_file(out);
  if (text.find_first_not_of(" \n") == std::string::npos) return keys;  // empty listing prints nothing
  for (const auto& o : nlohmann::json::parse(text).value("Contents", nlohmann::json::array())) {
    keys[o["Key"].get<std::string>().substr(prefix.size() + 1)] = o["Size"].get<int64_t>();
  }
  return keys;
}

// An object read back by the AWS CLI.
std::string aws_get(const testing::S3TestServer& s, const std::string& key, const TempDir& tmp) {
  std::string dst = tmp.file("got");
  fs::remove(dst);
  int rc = run({"aws", "--endpoint-url", s.endpoint(), "--region", "us-east-1", "s3", "cp", "--no-progress",
                "s3://" + std::string(testing::S3TestServer::kBucket) + "/" + key, dst},
               s3_env(s), tmp.file("aws-get.log"), 60);
  EXPECT_EQ(rc, 0) << tail(tmp.file("aws-get.log"));
  return rc == 0 ? testing::read_file(dst) : "";
}

// (phase, step, loss, reward) rows of metrics.jsonl.
std::vector<nlohmann::json> curve(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    nlohmann::json row = nlohmann::json::parse(line);
    nlohmann::json r = {{"phase", row["phase"]}, {"loss", row["loss"]}};
    r["step"] = row.contains("step") ? row["step"] : row["sft_step"];
    if (row.contains("reward")) r["reward"] = row["reward"];
    out.push_back(r);
  }
  return out;
}

std::string bin() {
  const char* b = std::getenv("MOERL_BIN");
  return b && fs::exists(b) ? b : "";
}

std::string write_config(const TempDir& tmp, const std::string& name, const std::string& text) {
  std::ofstream(tmp.file(name)) << text;
  return tmp.file(name);
}

TEST(TrainOnS3, SyncCheckpointsGoToTheBucketAndTheRerunResumesOnTheSameCurve) {
  if (bin().empty()) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  auto& server = testing::shared_s3_server();
  TempDir tmp;
  std::string uri = testing::fresh_s3_uri("train-sync");
  std::string prefix = uri.substr(std::string("s3://").size() + std::string(testing::S3TestServer::kBucket).size() + 1);
  std::string local_cfg = write_config(tmp, "local.toml", e2e::tiny_job_text(kSyncJob));
  std::string s3_cfg =
      write_config(tmp, "s3.toml", e2e::tiny_job_text(e2e::plus(kSyncJob, {"store.uri=\"" + uri + "\""})));
  auto env = s3_env(server);

  // Reference: uninterrupted, local store.
  ASSERT_EQ(run({bin(), "train", local_cfg, "--run-dir", tmp.file("full"), "--no-plot"}, env, tmp.file("full.log"), 120), 0)
      << tail(tmp.file("full.log"));

  // S3: stop after RL step 3.
  ASSERT_EQ(run({bin(), "train", s3_cfg, "--run-dir", tmp.file("s3"), "--no-plot", "--stop-after-step", "3"}, env,
                tmp.file("s3-1.log"), 120),
            0)
      << tail(tmp.file("s3-1.log"));
  EXPECT_FALSE(fs::exists(tmp.file("s3/store"))) << "the job wrote a local store despite [store] uri";
  std::map<std::string, int64_t> keys = aws_list(server, prefix, tmp);
  std::set<std::string> commits;
  for (const auto& [k, size] : keys) {
    if (k.ends_with("/" + std::string(kManifestName))) commits.insert(k.substr(0, k.size() - std::strlen(kManifestName) - 1));
  }
  // RL step 3 is committed and the latest pointer names it.
  ASSERT_TRUE(commits.count("ckpt/step-00000003-sft-000010")) << testing::read_file(tmp.file("list.json"));
  EXPECT_TRUE(keys.count("ckpt/latest"));
  EXPECT_NE(aws_get(server, prefix + "/ckpt/latest", tmp).find("ckpt/step-00000003-sft-000010"), std::string::npos);
  // The manifest the CLI reads back lists shards that are in the bucket with those sizes.
  nlohmann::json manifest = nlohmann::json::parse(aws_get(server, prefix + "/ckpt/step-00000003-sft-000010/" + kManifestName, tmp));
  int shards = 0;
  for (const auto& entry : manifest["objects"]) {
    std::string key = "ckpt/step-00000003-sft-000010/" + entry["name"].get<std::string>();
    ASSERT_TRUE(keys.count(key)) << key << " is in the manifest but not in the bucket";
    EXPECT_EQ(keys[key], entry["size"].get<int64_t>()) << key;
    ++shards;
  }
  EXPECT_GE(shards, 3) << manifest.dump();  // model weights, optimizer, trainer state
  EXPECT_NE(testing::read_file(tmp.file("s3-1.log")).find("stopped after RL step 3"), std::string::npos);

  // Rerun: resumes from the bucket and reproduces the uninterrupted curve.
  ASSERT_EQ(run({bin(), "train", s3_cfg, "--run-dir", tmp.file("s3"), "--no-plot"}, env, tmp.file("s3-2.log"), 120), 0)
      << tail(tmp.file("s3-2.log"));
  std::string log2 = testing::read_file(tmp.file("s3-2.log"));
  EXPECT_NE(log2.find("store " + uri + ", resumed"), std::string::npos) << tail(tmp.file("s3-2.log"));
  nlohmann::json summary = nlohmann::json::parse(testing::read_file(tmp.file("s3/summary.json")));
  EXPECT_EQ(summary["steps"]["rl"], 6);
  EXPECT_EQ(summary["steps"]["sft"], 10);
  std::vector<nlohmann::json> full = curve(tmp.file("full")), resumed = curve(tmp.file("s3"));
  ASSERT_EQ(full.size(), 16u);  // 10 SFT + 6 RL rows
  ASSERT_EQ(resumed.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) EXPECT_EQ(resumed[i], full[i]) << "row " << i;
  keys = aws_list(server, prefix, tmp);
  EXPECT_EQ(keys.count("ckpt/step-00000006-sft-000010/" + std::string(kManifestName)), 1u)
      << testing::read_file(tmp.file("list.json"));
}

// Processes whose command line holds `needle` (the rollout workers the killed trainer forked).
int processes_with(const std::string& needle) {
  int n = 0;
  DIR* d = ::opendir("/proc");
  if (!d) return 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(needle) != std::string::npos) ++n;
  }
  ::closedir(d);
  return n;
}

std::set<uint64_t> weight_versions(const std::map<std::string, int64_t>& keys) {
  std::set<uint64_t> v;
  std::regex re("weights/v([0-9]{8})/manifest\\.moerl\\.json");
  for (const auto& [k, size] : keys) {
    std::smatch m;
    if (std::regex_match(k, m, re)) v.insert(std::stoull(m[1]));
  }
  return v;
}

TEST(TrainOnS3, AsyncWeightVersionsGoToTheBucketAndAKilledTrainerResumesFromIt) {
  if (bin().empty()) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  auto& server = testing::shared_s3_server();
  TempDir tmp;
  runtime::RedisServer redis = runtime::RedisServer::start(tmp.file("redis"), Deadline::after_seconds(15));
  std::string uri = testing::fresh_s3_uri("train-async");
  std::string prefix = uri.substr(std::string("s3://").size() + std::string(testing::S3TestServer::kBucket).size() + 1);
  std::string cfg = write_config(
      tmp, "async.toml",
      e2e::tiny_job_text(e2e::plus(kAsyncJob, {"store.uri=\"" + uri + "\""})) +
          "\n[runtime]\nmode = \"async\"\nqueue_url = \"" + redis.url() +
          "\"\nnamespace = \"s3train\"\ntasks_per_lease = 2\nlease_seconds = 2\nmax_staleness = 4\n"
          "stale_policy = \"regenerate\"\ndrain_seconds = 3\ndrain_margin_seconds = 0.5\ncall_timeout_seconds = 10\n");
  std::string run_dir = tmp.file("run");
  auto env = s3_env(server);
  std::vector<std::string> argv = {bin(), "train", cfg, "--mode", "async", "--run-dir", run_dir, "--no-plot"};

  // First run: kill -9 once a checkpoint is committed (the rollout workers get SIGTERM and drain).
  Subprocess trainer = spawn(argv, env, tmp.file("run-1.log"));
  bool committed = false;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60); std::chrono::steady_clock::now() < end;) {
    if (tail(tmp.file("run-1.log")).find("checkpoint: committed ckpt/step-") != std::string::npos) {
      committed = true;
      break;
    }
    if (trainer.poll()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(committed) << tail(tmp.file("run-1.log"));
  trainer.kill();
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
       processes_with("rollout " + run_dir) > 0 && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(processes_with("rollout " + run_dir), 0) << "rollout workers outlived their trainer";

  std::map<std::string, int64_t> keys = aws_list(server, prefix, tmp);
  std::set<uint64_t> before = weight_versions(keys);
  ASSERT_FALSE(before.empty()) << "no weight version in the bucket: " << testing::read_file(tmp.file("list.json"));
  char vkey[64];
  std::snprintf(vkey, sizeof(vkey), "weights/v%08llu/", static_cast<unsigned long long>(*before.rbegin()));
  EXPECT_TRUE(keys.count(std::string(vkey) + "model.safetensors"));
  EXPECT_TRUE(keys.count("ckpt/latest"));
  // The AWS CLI reads a published version's manifest.
  nlohmann::json wm = nlohmann::json::parse(aws_get(server, prefix + "/" + vkey + kManifestName, tmp));
  EXPECT_EQ(wm["extra"]["kind"], "policy-weights") << wm.dump();

  // Rerun: resumes at the committed step, finishes, nothing lost, later versions published.
  int rc = run(argv, env, tmp.file("run-2.log"), 120);
  ASSERT_EQ(rc, 0) << tail(tmp.file("run-2.log"));
  std::smatch m;
  std::string log2 = testing::read_file(tmp.file("run-2.log"));
  ASSERT_TRUE(std::regex_search(log2, m, std::regex("resumed at step ([0-9]+)"))) << tail(tmp.file("run-2.log"));
  int64_t resumed_at = std::stoll(m[1]);
  EXPECT_GE(resumed_at, 2);
  EXPECT_EQ(resumed_at % 2, 0);
  nlohmann::json summary = nlohmann::json::parse(testing::read_file(run_dir + "/summary.json"));
  EXPECT_EQ(summary["steps"]["rl"], 8);
  EXPECT_EQ(summary["accounting"]["lost"], 0) << summary.dump(2);
  std::set<uint64_t> after = weight_versions(aws_list(server, prefix, tmp));
  ASSERT_FALSE(after.empty());
  EXPECT_GT(*after.rbegin(), *before.rbegin());
  EXPECT_GE(*after.rbegin(), 8u);
  EXPECT_LE(after.size(), 3u) << "publisher keeps the newest 3 versions";
}

}  // namespace
}  // namespace moerl::store
