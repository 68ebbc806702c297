// The tools RL users already run, against real jobs: Debian's Prometheus server scrapes
// `moerl train` (sync), `moerl trainer` and `moerl rollout` (async over Redis) and its query
// API returns their series, promtool accepts each role's exposition; the TensorBoard events
// of a run hold every numeric metrics.jsonl field (decoded by the test's own reader); a run
// scored by a Python reward service (examples/reward_server.py) reproduces the verifier's run
// bit for bit in sync mode and trains in async mode, the workers calling the service.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "base/files.h"
#include "base/jsonl.h"
#include "base/metrics.h"
#include "e2e/async_test_util.h"
#include "e2e/test_prometheus.h"
#include "e2e/tiny_job.h"
#include "io/tb/test_event_reader.h"
#include "job/roles.h"
#include "runtime/redis_server.h"
#include "tasks/test_reward_server.h"

namespace moerl::e2e {
namespace {

namespace fs = std::filesystem;
using train::testing::make_temp_dir;
using train::testing::read_text;
using train::testing::moerl_bin;
using train::testing::spawn_moerl;
using train::testing::wait_exit;

std::vector<std::string> metrics_on(int port) {
  return {"--set", "metrics.prometheus_port=" + std::to_string(port), "--set", "metrics.prometheus_host=127.0.0.1"};
}

std::vector<std::string> args(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// A role whose /metrics the test fetches while it runs.
struct Scraped {
  int port;
  std::string series;  // the exposition is kept once it holds this series
  Subprocess* proc;
  std::string log;
  std::string text;    // filled by scrape_all
};

// Polls every role's own /metrics (all at once: a short role may end while another is read)
// until each exposition holds its series; a role that exits first is a failure.
void scrape_all(std::vector<Scraped>& roles) {
  for (Deadline d = Deadline::after_seconds(240); !d.expired(); std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    bool all = true;
    for (Scraped& r : roles) {
      if (!r.text.empty()) continue;
      all = false;
      http::HttpResponse resp = http_get("http://127.0.0.1:" + std::to_string(r.port) + "/metrics");
      if (resp.status == 200 && resp.body.find("\n" + r.series) != std::string::npos) {
        r.text = resp.body;
      } else if (!r.proc->running()) {
        ADD_FAILURE() << r.series << " never appeared at port " << r.port << "; log:\n" << read_text(r.log);
        r.text = "(exited)";
      }
    }
    if (all) return;
  }
  ADD_FAILURE() << "roles not scraped in 240 s";
}

std::vector<nlohmann::json> rows_of(const std::string& run_dir, const std::string& phase) {
  std::vector<nlohmann::json> out;
  for (auto& r : metrics::read_jsonl(run_dir + "/metrics.jsonl")) {
    if (r["phase"] == phase) out.push_back(std::move(r));
  }
  return out;
}

TEST(Observability, PrometheusScrapesEveryRoleAndPromtoolAcceptsThem) {
  if (moerl_bin().empty()) GTEST_SKIP() << "MOERL_BIN is not set (run through ctest)";
  const std::string dir = make_temp_dir("prom");
  const int p_sync = runtime::pick_free_loopback_port(), p_trainer = runtime::pick_free_loopback_port(),
            p_rollout = runtime::pick_free_loopback_port();
  PrometheusServer prom(dir + "/prometheus",
                        {{"moerl-sync", p_sync}, {"moerl-trainer", p_trainer}, {"moerl-rollout", p_rollout}});

  // 1. `moerl train`, sync.
  const std::string sync_run = dir + "/sync";
  const std::string cfg = write_tiny_job(dir + "/cfg", {"train.sft_steps=10", "train.steps=150", "train.eval_prompts=4"});
  Subprocess job = spawn_moerl(args({"train", cfg, "--run-dir", sync_run, "--no-plot"}, metrics_on(p_sync)),
                               dir + "/sync.log");
  std::vector<Scraped> sync_role = {{p_sync, "moerl_rl_step", &job, dir + "/sync.log", ""}};
  scrape_all(sync_role);
  EXPECT_EQ(promtool_findings(sync_role[0].text, dir + "/sync.prom"), "") << sync_role[0].text;
  ASSERT_EQ(wait_exit(job, 600), 0) << read_text(dir + "/sync.log");
  const std::string sync_log = read_text(dir + "/sync.log");
  EXPECT_NE(sync_log.find("metrics: train serves Prometheus metrics at http://127.0.0.1:" + std::to_string(p_sync) +
                          "/metrics"),
            std::string::npos);
  EXPECT_NE(sync_log.find("until Prometheus scrapes the final values"), std::string::npos) << sync_log;
  EXPECT_EQ(sync_log.find("no Prometheus scrape"), std::string::npos) << sync_log;
  const std::vector<nlohmann::json> rl = rows_of(sync_run, "rl");
  ASSERT_EQ(rl.size(), 150u);
  // The job served until Prometheus had read its end (final_scrape_wait_s), so Prometheus
  // holds the last step and its reward, however short the run was.
  std::optional<double> step = prom.wait_for("last_over_time(moerl_rl_step{job=\"moerl-sync\"}[10m])", 30);
  ASSERT_TRUE(step.has_value()) << "Prometheus has no moerl_rl_step of the sync job";
  EXPECT_EQ(*step, 150);
  EXPECT_EQ(prom.instant("last_over_time(moerl_rl_reward{job=\"moerl-sync\"}[10m])"), rl.back()["reward"].get<double>());
  EXPECT_EQ(prom.instant("max_over_time(up{job=\"moerl-sync\"}[10m])"), 1.0);
  EXPECT_EQ(prom.instant("last_over_time(moerl_role_info{job=\"moerl-sync\",role=\"train\",mode=\"sync\"}[10m])"), 1.0);
  EXPECT_GT(prom.instant("last_over_time(moerl_rl_samples_total{job=\"moerl-sync\"}[10m])").value_or(0), 0);

  // 2. `moerl trainer` and `moerl rollout` over Redis.
  runtime::RedisServer redis = runtime::RedisServer::start(dir + "/redis", Deadline::after_seconds(15));
  const std::string async_run = dir + "/async";
  fs::create_directories(dir + "/acfg");
  const std::string acfg = train::testing::write_config(
      dir + "/acfg", train::testing::tiny_config_text("mode = \"async\"\nqueue_url = \"" + redis.url() +
                                                          "\"\nnamespace = \"prom\"\n",
                                                      "", {"train.steps=30", "train.eval_prompts=4"}));
  Subprocess trainer = spawn_moerl(args({"trainer", acfg, "--run-dir", async_run, "--no-plot"}, metrics_on(p_trainer)),
                                   dir + "/trainer.log");
  Subprocess worker = spawn_moerl(
      args({"rollout", acfg, "--run-dir", async_run, "--worker-id", "w0"}, metrics_on(p_rollout)), dir + "/rollout.log");
  std::vector<Scraped> async_roles = {
      {p_rollout, "moerl_rollout_records_total", &worker, dir + "/rollout.log", ""},
      {p_trainer, "moerl_rl_version", &trainer, dir + "/trainer.log", ""}};
  scrape_all(async_roles);
  EXPECT_EQ(promtool_findings(async_roles[0].text, dir + "/rollout.prom"), "") << async_roles[0].text;
  EXPECT_EQ(promtool_findings(async_roles[1].text, dir + "/trainer.prom"), "") << async_roles[1].text;
  ASSERT_EQ(wait_exit(trainer, 600), 0) << read_text(dir + "/trainer.log");
  EXPECT_EQ(wait_exit(worker, 120), 0) << read_text(dir + "/rollout.log");
  // The trainer served until Prometheus read its last row (its stale-dropped samples can end
  // the run before train.steps).
  const std::vector<nlohmann::json> arl = rows_of(async_run, "rl");
  ASSERT_FALSE(arl.empty());
  EXPECT_EQ(prom.wait_for("last_over_time(moerl_rl_step{job=\"moerl-trainer\"}[10m])", 30),
            arl.back()["step"].get<double>())
      << prom.query("moerl_rl_step{job=\"moerl-trainer\"}[10m]").dump();
  for (const char* q : {"last_over_time(moerl_rl_step{job=\"moerl-trainer\"}[10m])",
                        "last_over_time(moerl_rl_version{job=\"moerl-trainer\"}[10m])",
                        "last_over_time(moerl_rollout_records_total{job=\"moerl-rollout\",worker=\"w0\"}[10m])",
                        "last_over_time(moerl_rollout_leases_total{job=\"moerl-rollout\",worker=\"w0\"}[10m])",
                        "last_over_time(moerl_rollout_response_tokens_total{job=\"moerl-rollout\"}[10m])"}) {
    std::optional<double> v = prom.wait_for(q, 10);
    ASSERT_TRUE(v.has_value()) << q;
    EXPECT_GT(*v, 0) << q;
  }
  for (const char* q : {"last_over_time(moerl_rl_staleness_mean{job=\"moerl-trainer\"}[10m])",
                        "last_over_time(moerl_rl_queue_depth{job=\"moerl-trainer\"}[10m])",
                        "last_over_time(moerl_rl_tasks_leased{job=\"moerl-trainer\"}[10m])",
                        "last_over_time(moerl_rl_tasks_lost{job=\"moerl-trainer\"}[10m])",
                        "last_over_time(moerl_rollout_leases_lost_total{job=\"moerl-rollout\"}[10m])"}) {
    EXPECT_TRUE(prom.instant(q).has_value()) << q;
  }
  EXPECT_EQ(prom.instant("last_over_time(moerl_role_info{job=\"moerl-rollout\",role=\"rollout\",worker=\"w0\"}[10m])"),
            1.0);
  EXPECT_EQ(prom.instant("last_over_time(moerl_role_info{job=\"moerl-trainer\",role=\"trainer\"}[10m])"), 1.0);
  remove_tree(dir);
}

// Every numeric leaf of a metrics.jsonl row, flattened here independently of the job's code.
void flatten(const nlohmann::json& v, const std::string& prefix, std::map<std::string, nlohmann::json>& out) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) flatten(it.value(), prefix + "/" + it.key(), out);
  } else if (v.is_number() || v.is_null()) {
    out[prefix] = v;  // null: a NaN or Inf the JSONL writer could not spell
  }
}

TEST(Observability, TensorBoardEventsHoldEveryMetricsField) {
  const fs::path dir = make_temp_dir("tb");
  job::JobOptions o;
  o.run_dir = dir.string();
  o.plot = false;
  job::run_job(tiny_job({"metrics.tensorboard=true", "train.eval_every=2"}), o);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir / "tb")) files.push_back(e.path().filename().string());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].rfind("events.out.tfevents.", 0), 0u) << files[0];
  std::vector<tb::Event> ev = tb::testing::read_events((dir / "tb" / files[0]).string());
  const std::vector<nlohmann::json> rows = metrics::read_jsonl((dir / "metrics.jsonl").string());
  ASSERT_EQ(ev.size(), rows.size() + 1);
  EXPECT_EQ(ev[0].file_version(), "brain.Event:2");
  size_t compared = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& r = rows[i];
    const std::string phase = r["phase"].get<std::string>();
    EXPECT_EQ(ev[i + 1].step(), phase == "rl" ? r["step"].get<int64_t>() : r["sft_step"].get<int64_t>());
    std::map<std::string, nlohmann::json> want;
    for (auto it = r.begin(); it != r.end(); ++it) flatten(it.value(), phase + "/" + it.key(), want);
    std::map<std::string, float> got;
    for (const auto& v : ev[i + 1].summary().value()) got[v.tag()] = v.simple_value();
    EXPECT_EQ(got.size(), want.size()) << r.dump();
    for (const auto& [tag, v] : want) {
      ASSERT_TRUE(got.count(tag)) << tag << " missing at row " << i;
      if (v.is_null()) {
        EXPECT_FALSE(std::isfinite(got[tag])) << tag;
      } else {
        EXPECT_EQ(got[tag], static_cast<float>(v.get<double>())) << tag << " at row " << i;
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 40u * 6 + 6u * 20) << "every SFT and RL field of the tiny job";
  EXPECT_TRUE(std::any_of(ev.begin(), ev.end(), [](const tb::Event& e) {
    for (const auto& v : e.summary().value()) if (v.tag() == "rl/eval_reward") return true;
    return false;
  })) << "periodic eval rows carry eval_reward";
  remove_tree(dir.string());
}

nlohmann::json run_in(const fs::path& dir, const job::JobConfig& cfg) {
  job::JobOptions o;
  o.run_dir = dir.string();
  o.plot = false;
  return job::run_job(cfg, o);
}

TEST(Observability, HttpRewardRunReproducesTheVerifierRun) {
  tasks::testing::RewardServer srv({"--format-reward", "0.2", "--max-answer-digits", "2"});
  const fs::path a = make_temp_dir("verifier"), b = make_temp_dir("http");
  const double t0 = now_seconds();
  nlohmann::json sa = run_in(a, tiny_job());
  const double t1 = now_seconds();
  nlohmann::json sb = run_in(b, tiny_job({"task.reward=\"http\"", "task.reward_url=\"" + srv.url() + "\""}));
  std::printf("tiny job: verifier %.2f s, http reward %.2f s (%d requests)\n", t1 - t0, now_seconds() - t1,
              srv.stats()["requests"].get<int>());
  EXPECT_EQ(sa["eval"], sb["eval"]) << "evaluation is scored by the service too";
  std::vector<nlohmann::json> ra = rows_of(a.string(), "rl"), rb = rows_of(b.string(), "rl");
  ASSERT_EQ(ra.size(), 6u);
  ASSERT_EQ(rb.size(), 6u);
  for (size_t i = 0; i < ra.size(); ++i) {
    for (const char* k : {"reward", "reward_std", "loss", "grad_norm", "kl", "response_len", "clip_frac"}) {
      EXPECT_EQ(ra[i][k], rb[i][k]) << k << " at step " << i + 1;
    }
    ASSERT_TRUE(rb[i].contains("reward_extra")) << rb[i].dump();
    const double f = rb[i]["reward_extra"]["format"].get<double>();
    EXPECT_GE(f, 0);
    EXPECT_LE(f, 1);
    EXPECT_GT(rb[i]["reward_extra"]["length"].get<double>(), 0);
    EXPECT_FALSE(ra[i].contains("reward_extra"));
  }
  EXPECT_GT(srv.stats()["requests"].get<int>(), 6);
  remove_tree(a.string());
  remove_tree(b.string());
}

TEST(Observability, AsyncWorkersCallTheRewardService) {
  tasks::testing::RewardServer srv({"--delay", "0.05", "--max-answer-digits", "3"});
  const fs::path dir = make_temp_dir("http-async");
  const std::string series = "moerl_rollout_records_total{worker=\"thread-0\"}";
  auto records = [&] { return metrics::default_registry().to_json().value(series, 0.0); };
  const double before = records();
  nlohmann::json s = run_in(dir, tiny_job(plus(kAsyncTiny, {"runtime.mode=\"async\"", "task.reward=\"http\"",
                                                            "task.reward_url=\"" + srv.url() + "\"",
                                                            "task.reward_concurrency=2", "train.eval_prompts=8"})));
  EXPECT_EQ(s["mode"], "async");
  EXPECT_EQ(s["steps"]["rl"], 4);
  for (const auto& r : rows_of(dir.string(), "rl")) {
    EXPECT_GE(r["reward"].get<double>(), 0);
    EXPECT_LE(r["reward"].get<double>(), 1);
  }
  // The worker thread's records went through the metered buffer, scored by the service.
  EXPECT_GE(records() - before, 16);
  EXPECT_GE(srv.stats()["requests"].get<int>(), 4);
  EXPECT_LE(srv.stats()["max_in_flight"].get<int>(), 2);
  remove_tree(dir.string());
}

}  // namespace
}  // namespace moerl::e2e
