// S3 retries under injected faults: a loopback proxy in front of the S3 test server answers
// 503 SlowDown / 500 bursts, closes connections mid-upload, truncates downloads and drops
// responses after the server applied the request. Retries converge to the right bytes, give
// up after max_attempts or the deadline, and a commit under random chaos is never partial;
// a server whose clock is off ours corrects the signing time (RequestTimeTooSkewed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <random>
#include <thread>

#include "base/deadline.h"
#include "base/error.h"
#include "io/checksum.h"
#include "store/commit.h"
#include "store/s3/s3_client.h"
#include "store/s3/s3_store.h"
#include "store/s3/upload_marker.h"
#include "store/testing/loopback_http.h"
#include "store/testing/s3_env.h"
#include "store/testing/test_util.h"

namespace moerl::store::s3 {
namespace {

using testing::HttpExchange;
using testing::LoopbackHttp;
using testing::Reply;
using testing::TempDir;

int64_t unix_of_amz_date(const std::string& d) {
  std::tm tm{};
  std::istringstream in(d);
  in >> std::get_time(&tm, "%Y%m%dT%H%M%SZ");
  return in.fail() ? 0 : static_cast<int64_t>(timegm(&tm));
}

std::string http_date(int64_t t) {
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

// A server whose clock is an hour ahead of this machine's refuses requests signed more than
// 15 minutes off it (as S3 does); the client learns the offset from the answer's Date
// header, retries, and signs every later request with the server's time.
TEST(S3Faults, SkewedClockIsCorrectedFromTheServersDate) {
  constexpr int64_t kSkew = 3600;
  LoopbackHttp server([](const HttpExchange& ex) {
    const int64_t server_now = std::time(nullptr) + kSkew;
    auto d = ex.headers.find("x-amz-date");
    if (d == ex.headers.end() || std::llabs(unix_of_amz_date(d->second) - server_now) > 900) {
      return Reply::respond(403,
                            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>RequestTimeTooSkewed</Code>"
                            "<Message>The difference between the request time and the current time is too large."
                            "</Message></Error>",
                            {{"Date", http_date(server_now)}});
    }
    return Reply::respond(200, "on time");
  });
  S3Client client(testing::s3_options(server.url()), "bucket", testing::s3_credentials());
  S3Result r = client.execute(S3Call{"GetObject", "GET", "k"});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "on time");
  EXPECT_NEAR(static_cast<double>(client.clock_offset_seconds()), kSkew, 2);
  EXPECT_EQ(server.requests(), 2);
  EXPECT_EQ(client.execute(S3Call{"GetObject", "GET", "k2"}).status, 200);
  EXPECT_EQ(server.requests(), 3);  // signed right the first time
}

TEST(S3Faults, SlowDownAnd5xxBurstConverges) {
  auto& server = testing::shared_s3_server();
  LoopbackHttp proxy(
      [](const HttpExchange& ex) {
        if (ex.index < 3) return Reply::slow_down();
        if (ex.index < 5) return Reply::internal_error();
        return Reply::forward();
      },
      server.port());
  S3Store s(testing::fresh_s3_uri("burst"), testing::s3_options(proxy.url()), testing::s3_credentials());
  std::string data = testing::random_bytes(300000, 1);
  s.put("k", data);
  EXPECT_EQ(s.client().retries(), 5);
  EXPECT_EQ(proxy.requests(), 6);
  EXPECT_EQ(s.get("k"), data);
}

TEST(S3Faults, GivesUpAfterMaxAttemptsAndAtTheDeadline) {
  LoopbackHttp always([](const HttpExchange&) { return Reply::slow_down(); });
  S3Options o = testing::s3_options(always.url());
  o.max_attempts = 4;
  S3Store s(testing::fresh_s3_uri("giveup"), o, testing::s3_credentials());
  try {
    s.put("k", "v");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("after 4 attempts"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("SlowDown"), std::string::npos) << e.what();
  }
  EXPECT_EQ(always.requests(), 4);

  o.max_attempts = 1000;
  o.base_backoff_s = 0.2;
  o.max_backoff_s = 0.4;
  o.request_deadline_s = 1.5;
  S3Store slow(testing::fresh_s3_uri("deadline"), o, testing::s3_credentials());
  double t0 = now_seconds();
  try {
    slow.get("k");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
  }
  EXPECT_LT(now_seconds() - t0, 3.0);
}

TEST(S3Faults, ConnectionDroppedMidUploadAndTruncatedDownloadResume) {
  auto& server = testing::shared_s3_server();
  std::atomic<int> part_puts{0}, gets{0};
  LoopbackHttp proxy(
      [&](const HttpExchange& ex) {
        if (ex.method == "PUT" && ex.has("partNumber=")) {
          int n = part_puts++;
          if (n == 1) return Reply::close_mid_request();  // connection reset mid-body
          if (n == 3) return Reply::internal_error();
        }
        if (ex.method == "GET" && ex.headers.count("range") && gets++ == 0) return Reply::forward_truncated();
        return Reply::forward();
      },
      server.port());
  S3Options o = testing::s3_options(proxy.url());
  o.part_size = 5u << 20;
  o.multipart_threshold = 5u << 20;
  o.concurrency = 2;
  TempDir tmp;
  S3Store s(testing::fresh_s3_uri("drop"), o, testing::s3_credentials());
  std::string src = tmp.file("f.bin");
  std::string sha = testing::write_random_file(src, 16u << 20, 3);
  s.put_file("f.bin", src);
  EXPECT_EQ(part_puts.load(), 4 + 2);  // four parts, two of them retried
  EXPECT_EQ(s.head("f.bin")->size, 16u << 20);

  std::string dst = tmp.file("back.bin");
  s.get_file("f.bin", dst);
  EXPECT_EQ(io::sha256_file_hex(dst), sha);
  // The truncated range was resumed from where it stopped, not restarted.
  int resumed = 0;
  for (const auto& ex : proxy.log()) {
    if (ex.method != "GET" || !ex.headers.count("range")) continue;
    const std::string& r = ex.headers.at("range");
    uint64_t start = std::stoull(r.substr(6));
    if (start % (5u << 20) != 0) ++resumed;
  }
  EXPECT_EQ(resumed, 1);
}

// A client that dies mid-PUT (the trainer SIGKILLed while publishing) leaves no object: S3
// stores a PUT whole or not at all, and so must the test server (s3rver wrote in place, so
// listings and GETs served the truncated body -- an empty manifest that failed a CI run).
TEST(S3Faults, UploadCutMidBodyLeavesNoObject) {
  auto& server = testing::shared_s3_server();
  LoopbackHttp cutter([](const HttpExchange& ex) { return ex.method == "PUT" ? Reply::forward_half_then_cut() : Reply::forward(); },
                      server.port());
  S3Options o = testing::s3_options(cutter.url());
  o.max_attempts = 1;
  std::string uri = testing::fresh_s3_uri("cut");
  S3Store via_cutter(uri, o, testing::s3_credentials());
  EXPECT_THROW(via_cutter.put("manifest.json", std::string(256 << 10, 'm')), Error);
  S3Store direct(uri, testing::s3_options(server.endpoint()), testing::s3_credentials());
  for (int i = 0; i < 10; ++i) {
    ASSERT_FALSE(direct.head("manifest.json").has_value()) << "a cut upload left an object (check " << i << ")";
    EXPECT_TRUE(direct.list("").empty());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  direct.put("manifest.json", "{}");
  EXPECT_EQ(direct.get("manifest.json"), "{}");
}

TEST(S3Faults, LostResponseOfConditionalPutIsOurWrite) {
  auto& server = testing::shared_s3_server();
  std::atomic<int> conditional{0};
  LoopbackHttp proxy(
      [&](const HttpExchange& ex) {
        if (ex.headers.count("if-none-match") && conditional++ == 0) return Reply::forward_then_drop();
        return Reply::forward();
      },
      server.port());
  S3Store s(testing::fresh_s3_uri("lost"), testing::s3_options(proxy.url()), testing::s3_credentials());
  // The first attempt lands but its answer is lost; the retry gets 412 and must recognise
  // its own bytes rather than report "already exists".
  EXPECT_EQ(s.put_if_absent("manifest.json", "mine"), PutOutcome::kCreated);
  EXPECT_EQ(conditional.load(), 2);
  EXPECT_EQ(s.put_if_absent("manifest.json", "someone else"), PutOutcome::kAlreadyExists);
  EXPECT_EQ(s.get("manifest.json"), "mine");
}

TEST(S3Faults, CommitsUnderRandomChaosAreWholeOrAbsent) {
  auto& server = testing::shared_s3_server();
  std::mutex mu;
  std::mt19937 rng(20261129);
  LoopbackHttp proxy(
      [&](const HttpExchange&) {
        std::lock_guard<std::mutex> lock(mu);
        int roll = static_cast<int>(rng() % 100);
        if (roll < 10) return Reply::slow_down();
        if (roll < 18) return Reply::internal_error();
        if (roll < 26) return Reply::close_mid_request();
        if (roll < 34) return Reply::forward_then_drop();
        return Reply::forward();
      },
      server.port());
  S3Options o = testing::s3_options(proxy.url());
  o.part_size = 5u << 20;
  o.multipart_threshold = 5u << 20;
  o.max_attempts = 12;
  TempDir tmp;
  std::string uri = testing::fresh_s3_uri("chaos");
  S3Store s(uri, o, testing::s3_credentials());
  S3Store direct(uri, testing::s3_options(server.endpoint()), testing::s3_credentials());
  for (int v = 1; v <= 3; ++v) {
    std::string model = tmp.file("m" + std::to_string(v));
    testing::write_random_file(model, (6u << 20) + v, 500 + v);
    CommitWriter w(s, "weights/v" + std::to_string(v));
    w.put_file("model.safetensors", model);
    w.put_bytes("config.json", "{\"version\":" + std::to_string(v) + "}");
    w.commit({{"version", v}});
    auto r = CommitReader::latest(direct, "weights");
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->manifest().extra["version"], v);
    r->get_file("model.safetensors", tmp.file("check"));  // verifies size + sha256
    EXPECT_EQ(r->get_bytes("config.json"), "{\"version\":" + std::to_string(v) + "}");
  }
  // About a third of the requests failed; every one was retried to success.
  EXPECT_GE(s.client().retries(), proxy.requests() / 6) << proxy.requests() << " requests";
  // cleanup() aborts every upload a marker names and removes the markers. Uploads orphaned by
  // a lost CreateMultipartUpload answer have none (the client never learned their id): they
  // are the bucket lifecycle rule's (docs/formats/store_commit.md, "Upload markers").
  cleanup(direct, "weights", -10);
  EXPECT_TRUE(direct.list_pending("").empty());
  std::string root = testing::bucket_key(uri);
  for (const auto& k : testing::server_keys(root + "/")) {
    EXPECT_FALSE(upload_marker_target(k).has_value()) << "marker left behind: " << k;
  }
  EXPECT_EQ(list_commits(direct, "weights").size(), 3u);
}

}  // namespace
}  // namespace moerl::store::s3
