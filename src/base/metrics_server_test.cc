// The /metrics endpoint over real sockets on 127.0.0.1: what a scrape returns, the refresh
// hook, errors for a taken port, and `promtool check metrics` (Debian's prometheus package)
// on the exposition the registry renders.
#include "base/metrics_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
#include <fstream>

#include "base/error.h"
#include "base/http_client.h"
#include "base/subprocess.h"

namespace moerl::metrics {
namespace {

http::HttpResponse get(const std::string& url) {
  http::HttpClient client;
  return client.perform({.method = "GET", .url = url, .timeout_s = 10});
}

TEST(MetricsServer, ServesTheRegistryAndRefreshesBeforeEachScrape) {
  Registry reg;
  reg.counter("moerl_test_requests_total", "Requests.", {{"code", "200"}}).inc(3);
  std::atomic<int> scrapes{0};
  MetricsServer server(reg, {.host = "127.0.0.1", .port = 0},
                       [&] { reg.gauge("moerl_test_scrapes", "Scrapes so far.").set(++scrapes); });
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(server.url(), "http://127.0.0.1:" + std::to_string(server.port()) + "/metrics");
  http::HttpResponse r = get(server.url());
  ASSERT_EQ(r.status, 200) << r.transport_error << r.body;
  EXPECT_EQ(r.header("content-type"), kPrometheusContentType);
  EXPECT_EQ(r.body, reg.to_prometheus());
  EXPECT_NE(r.body.find("moerl_test_requests_total{code=\"200\"} 3\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("moerl_test_scrapes 1\n"), std::string::npos) << r.body;
  reg.counter("moerl_test_requests_total", "", {{"code", "200"}}).inc(2);
  r = get(server.url());
  EXPECT_NE(r.body.find("moerl_test_requests_total{code=\"200\"} 5\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("moerl_test_scrapes 2\n"), std::string::npos) << r.body;
  EXPECT_EQ(get("http://127.0.0.1:" + std::to_string(server.port()) + "/other").status, 404);
}

// Only a Prometheus-style scrape (the scrape-timeout header) counts toward the final-scrape
// wait; a wait that started after n scrapes ends on scrape n + 1, or at its deadline.
TEST(MetricsServer, CountsPrometheusScrapesAndWaitsForTheNextOne) {
  Registry reg;
  MetricsServer server(reg, {.host = "127.0.0.1", .port = 0});
  http::HttpClient client;
  auto scrape = [&] {
    return client.perform({.method = "GET", .url = server.url(),
                           .headers = {{"X-Prometheus-Scrape-Timeout-Seconds", "10"}}, .timeout_s = 10});
  };
  ASSERT_EQ(get(server.url()).status, 200);
  EXPECT_EQ(server.scrapes(), 0u);
  EXPECT_FALSE(server.wait_for_scrape_after(0, Deadline::after_seconds(0.3)));
  ASSERT_EQ(scrape().status, 200);
  EXPECT_EQ(server.scrapes(), 1u);
  EXPECT_TRUE(server.wait_for_scrape_after(0, Deadline::after_seconds(0)));
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(scrape().status, 200);
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(server.wait_for_scrape_after(1, Deadline::after_seconds(30)));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  later.join();
  EXPECT_EQ(server.scrapes(), 2u);
}

TEST(MetricsServer, TakenPortIsAnErrorNamingIt) {
  Registry reg;
  MetricsServer first(reg, {.host = "127.0.0.1", .port = 0});
  try {
    MetricsServer second(reg, {.host = "127.0.0.1", .port = first.port()});
    ADD_FAILURE() << "two servers on one port";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(first.port())), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("prometheus_port"), std::string::npos) << e.hint();
  }
  EXPECT_THROW(MetricsServer(reg, {.host = "127.0.0.1", .port = 70000}), Error);
}

TEST(MetricsServer, StopsPromptlyEvenWhenDestroyedAtOnce) {
  Registry reg;
  for (int i = 0; i < 20; ++i) MetricsServer s(reg, {.host = "127.0.0.1", .port = 0});
}

TEST(MetricsServer, PromtoolAcceptsTheExposition) {
  ASSERT_EQ(run_captured({"sh", "-c", "command -v promtool"}, Deadline::after_seconds(10)).status, 0)
      << "promtool not found: scripts/install-deps.sh installs the Debian prometheus package";
  Registry reg;
  reg.counter("moerl_rollout_tokens_total", "Response tokens generated.", {{"worker", "w0"}}).inc(128);
  reg.counter("moerl_rollout_tokens_total", "", {{"worker", "w\"1\\"}}).inc(7);
  reg.gauge("moerl_queue_depth", "Tasks queued.").set(4);
  reg.gauge("moerl_loss", "Loss.\nSecond line.").set(NAN);
  auto& h = reg.histogram("moerl_reward_http_request_seconds", "Request time.", exponential_buckets(0.01, 4, 5));
  for (double v : {0.003, 0.2, 9.0}) h.observe(v);
  const std::string path = testing::TempDir() + "/exposition." + std::to_string(::getpid()) + ".txt";
  std::ofstream(path) << reg.to_prometheus();
  SpawnOptions o;
  o.stdin_from = Redirect::file(path, FileMode::kAppend);
  CapturedRun r = run_captured({"promtool", "check", "metrics"}, Deadline::after_seconds(60), o);
  EXPECT_EQ(r.status, 0) << reg.to_prometheus() << "\npromtool:\n" << r.output;
  EXPECT_EQ(r.output, "") << "promtool printed lint findings";
  std::remove(path.c_str());
}

}  // namespace
}  // namespace moerl::metrics
