// The "http" reward against a real Python service on 127.0.0.1 (examples/reward_server.py):
// rewards equal to the built-in verifier's, batching and extra_logs, retries through 5xx, a
// service that always fails (a clear error, or the fallback when configured), a refused
// connection, the per-request deadline, the concurrency limit, and malformed answers.
#include "tasks/http_reward.h"

#include <gtest/gtest.h>

#include <thread>

#include "base/deadline.h"
#include "base/error.h"
#include "base/metrics.h"
#include "tasks/registry.h"
#include "tasks/test_reward_server.h"

namespace moerl::tasks {
namespace {

using testing::RewardServer;

HttpRewardConfig config_for(const std::string& url) {
  HttpRewardConfig c;
  c.url = url;
  c.backoff_seconds = 0.01;
  c.timeout_seconds = 20;
  c.task_name = "addition";
  return c;
}

// Addition items ("a+b=") with completions that are right, well-formed but wrong, or junk.
void addition_batch(int n, std::vector<TaskItem>& items, std::vector<std::string>& completions) {
  for (int i = 0; i < n; ++i) {
    const int a = i % 10, b = (3 * i) % 10;
    items.push_back({"addition/train/" + std::to_string(i), std::to_string(a) + "+" + std::to_string(b) + "=",
                     std::to_string(a + b)});
    completions.push_back(i % 3 == 0 ? std::to_string(a + b) + "\nmore" : i % 3 == 1 ? " 99 " : "x" + std::to_string(i));
  }
}

double counter(const std::string& name) { return metrics::default_registry().counter(name, "").value(); }

TEST(HttpReward, ScoresLikeTheVerifierInBatchesWithExtraLogs) {
  RewardServer srv({"--format-reward", "0.2", "--max-answer-digits", "2"});
  ConfigDoc doc = ConfigDoc::parse("[task]\nname = \"addition\"\ndigits = 1\nformat_reward = 0.2\nreward = \"http\"\n"
                                   "reward_url = \"" + srv.url() + "\"\nreward_batch_size = 3\n",
                                   "job.toml");
  ConfigTable t = doc.root().table("task");
  std::shared_ptr<const Task> task = make_task(t);
  std::unique_ptr<RewardFn> fn = make_reward_fn(t, task);
  t.done();
  ASSERT_EQ(fn->name(), "http");
  std::vector<TaskItem> items;
  std::vector<std::string> completions;
  addition_batch(10, items, completions);
  const double items_before = counter("moerl_reward_http_items_total");
  std::vector<double> got = fn->score(items, completions);
  VerifierRewardFn verifier(task);
  EXPECT_EQ(got, verifier.score(items, completions)) << "the service grades as the task's own verifier";
  EXPECT_EQ(srv.stats()["requests"], 4) << "10 items in batches of 3";
  EXPECT_EQ(counter("moerl_reward_http_items_total") - items_before, 10);
  std::map<std::string, double> logs = fn->drain_extra_logs();
  double well_formed = 0, length = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    std::string a = std::string(answer_text(completions[i]));
    well_formed += !a.empty() && a.size() <= 2 && a.find_first_not_of("0123456789") == std::string::npos;
    length += static_cast<double>(completions[i].size());
  }
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_DOUBLE_EQ(logs["format"], well_formed / 10);
  EXPECT_DOUBLE_EQ(logs["length"], length / 10);
  EXPECT_TRUE(fn->drain_extra_logs().empty()) << "drained";
  EXPECT_TRUE(fn->score({}, {}).empty());
}

TEST(HttpReward, RetriesThroughServerErrors) {
  RewardServer srv({"--fail-first", "2"});
  HttpRewardConfig c = config_for(srv.url());
  c.retries = 3;
  HttpRewardFn fn(c);
  const double retries_before = counter("moerl_reward_http_retries_total");
  std::vector<double> r = fn.score({{"q1", "1+1=", "2"}}, {"2"});
  EXPECT_EQ(r, std::vector<double>{1.0});
  EXPECT_EQ(srv.stats()["requests"], 3) << "two 503s, then the answer";
  EXPECT_EQ(counter("moerl_reward_http_retries_total") - retries_before, 2);
}

TEST(HttpReward, ServiceThatKeepsFailingIsAnErrorNamingUrlAndItem) {
  RewardServer srv({"--fail-always"});
  HttpRewardConfig c = config_for(srv.url());
  c.retries = 2;
  c.batch_size = 2;
  HttpRewardFn fn(c);
  try {
    fn.score({{"task-17", "1+1=", "2"}, {"task-18", "2+2=", "4"}}, {"2", "4"});
    ADD_FAILURE() << "a service answering 503 every time gave rewards";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(m.find(srv.url()), std::string::npos) << m;
    EXPECT_NE(m.find("item 'task-17'"), std::string::npos) << m;
    EXPECT_NE(m.find("failed 3 times"), std::string::npos) << m;
    EXPECT_NE(m.find("HTTP 503"), std::string::npos) << m;
    EXPECT_NE(e.hint().find("reward_on_error"), std::string::npos) << e.hint();
  }
  EXPECT_EQ(srv.stats()["requests"], 3);
  // With a fallback configured, the batch gets it (and is counted).
  c.on_error = -0.5;
  HttpRewardFn with_fallback(c);
  const double before = counter("moerl_reward_http_fallback_items_total");
  EXPECT_EQ(with_fallback.score({{"a", "1+1=", "2"}, {"b", "1+2=", "3"}, {"c", "1+3=", "4"}}, {"2", "3", "4"}),
            (std::vector<double>{-0.5, -0.5, -0.5}));
  EXPECT_EQ(counter("moerl_reward_http_fallback_items_total") - before, 3);
}

TEST(HttpReward, RefusedConnectionIsRetriedThenNamed) {
  std::string url;
  {
    RewardServer gone;  // a port that was just free, now closed again
    url = gone.url();
  }
  HttpRewardConfig c = config_for(url);
  c.retries = 1;
  HttpRewardFn fn(c);
  try {
    fn.score({{"only", "1+1=", "2"}}, {"2"});
    ADD_FAILURE() << "no service, yet rewards";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("no answer"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("item 'only'"), std::string::npos) << e.what();
  }
}

TEST(HttpReward, SlowServiceHitsThePerRequestDeadline) {
  RewardServer srv({"--delay", "2"});
  HttpRewardConfig c = config_for(srv.url());
  c.timeout_seconds = 0.3;
  c.retries = 1;
  HttpRewardFn fn(c);
  const double t0 = now_seconds();
  try {
    fn.score({{"slow", "1+1=", "2"}}, {"2"});
    ADD_FAILURE() << "a 2 s answer met a 0.3 s deadline";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("Timeout"), std::string::npos) << e.what();
  }
  const double took = now_seconds() - t0;
  EXPECT_GE(took, 0.55) << "two attempts of 0.3 s";
  EXPECT_LT(took, 1.9) << "neither attempt waited for the 2 s answer";
  // A deadline that fits: answered.
  c.timeout_seconds = 10;
  EXPECT_EQ(HttpRewardFn(c).score({{"slow", "1+1=", "2"}}, {"2"}), std::vector<double>{1.0});
}

TEST(HttpReward, ConcurrencyLimitHoldsAcrossCallers) {
  RewardServer srv({"--delay", "0.25"});
  HttpRewardConfig c = config_for(srv.url());
  c.batch_size = 1;
  c.concurrency = 2;
  HttpRewardFn fn(c);
  std::vector<TaskItem> items;
  std::vector<std::string> completions;
  addition_batch(4, items, completions);
  const double t0 = now_seconds();
  // Two callers at once (as two in-process rollout workers): 8 requests, at most 2 in flight.
  std::thread other([&] { fn.score(items, completions); });
  fn.score(items, completions);
  other.join();
  const double took = now_seconds() - t0;
  nlohmann::json st = srv.stats();
  EXPECT_EQ(st["requests"], 8);
  EXPECT_EQ(st["max_in_flight"], 2) << "the limit is reached and never exceeded";
  EXPECT_GE(took, 4 * 0.25 - 0.05) << "8 requests of 0.25 s, two at a time";
  // A wider limit overlaps more of them.
  RewardServer wide_srv({"--delay", "0.25"});
  c.url = wide_srv.url();
  c.concurrency = 8;
  HttpRewardFn wide(c);
  addition_batch(4, items, completions);  // 8 items
  wide.score(items, completions);
  EXPECT_GT(wide_srv.stats()["max_in_flight"].get<int>(), 2);
}

TEST(HttpReward, MalformedAnswersAreErrorsAtOnce) {
  struct Case {
    const char* reply;
    const char* says;
  };
  for (const Case& k : {Case{"not json", "not JSON"}, Case{"{\"rewards\": [1]}", "without a list of 2 rewards"},
                        Case{"{\"score\": [1, 2]}", "without a list of 2 rewards"},
                        Case{"{\"rewards\": [1, \"x\"]}", "item 'b' the reward \"x\""},
                        Case{"{\"scores\": [1, null]}", "item 'b' the reward null"}}) {
    RewardServer srv({"--reply-with", k.reply});
    HttpRewardConfig c = config_for(srv.url());
    c.on_error = 0.0;  // never used for a malformed answer
    HttpRewardFn fn(c);
    try {
      fn.score({{"a", "1+1=", "2"}, {"b", "1+2=", "3"}}, {"2", "3"});
      ADD_FAILURE() << "accepted " << k.reply;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << k.reply;
      EXPECT_NE(std::string(e.what()).find(k.says), std::string::npos) << e.what();
      EXPECT_NE(e.hint().find("reward_http.md"), std::string::npos);
    }
    EXPECT_EQ(srv.stats()["requests"], 1) << "not retried: " << k.reply;
  }
  // "scores" alone is accepted (OpenRLHF services may send only that).
  RewardServer srv({"--reply-with", "{\"scores\": [0.25, -1]}"});
  EXPECT_EQ(HttpRewardFn(config_for(srv.url())).score({{"a", "", ""}, {"b", "", ""}}, {"", ""}),
            (std::vector<double>{0.25, -1}));
}

TEST(HttpReward, ConfigKeysAreValidated) {
  auto build = [](const std::string& keys) {
    ConfigDoc doc = ConfigDoc::parse("[task]\nname = \"addition\"\nreward = \"http\"\n" + keys, "job.toml");
    ConfigTable t = doc.root().table("task");
    std::shared_ptr<const Task> task = make_task(t);
    auto fn = make_reward_fn(t, task);
    t.done();
    return fn;
  };
  EXPECT_THROW(build(""), Error);                                    // reward_url required
  EXPECT_THROW(build("reward_url = \"ftp://x/score\"\n"), Error);      // not http(s)
  EXPECT_THROW(build("reward_url = \"http://x\"\nreward_concurrency = 0\n"), Error);
  EXPECT_THROW(build("reward_url = \"http://x\"\nreward_timeout_seconds = -1\n"), Error);
  EXPECT_THROW(build("reward_url = \"http://x\"\nreward_retry = 2\n"), Error);  // typo: done() rejects it
  auto fn = build("reward_url = \"https://scorer.internal/v1\"\nreward_on_error = -1.0\nreward_retries = 0\n");
  const HttpRewardConfig& c = dynamic_cast<HttpRewardFn&>(*fn).config();
  EXPECT_EQ(c.url, "https://scorer.internal/v1");
  EXPECT_EQ(c.retries, 0);
  ASSERT_TRUE(c.on_error.has_value());
  EXPECT_EQ(*c.on_error, -1.0);
  EXPECT_FALSE(build("reward_url = \"http://x\"\n")->range().max < 1e300);
}

}  // namespace
}  // namespace moerl::tasks
