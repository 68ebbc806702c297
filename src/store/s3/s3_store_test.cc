// S3Store against a real S3-protocol server on loopback (tools/s3/server.js: s3rver, which
// verifies SigV4 header signatures): the ObjectStore contract (testing/store_contract.h)
// instantiated for S3Store, multipart with parallel parts on an 80 MiB file, ranged and
// parallel downloads, conditional PUT, abort + cleanup, virtual-hosted addressing, and
// interop with the AWS CLI in both directions.
#include "store/s3/s3_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "base/error.h"
#include "io/checksum.h"
#include "store/commit.h"
#include "store/fault_store.h"
#include "store/testing/loopback_http.h"
#include "store/testing/s3_env.h"
#include "store/testing/store_contract.h"
#include "store/testing/test_util.h"

namespace moerl::store::s3 {
namespace {

using testing::LoopbackHttp;
using testing::ObjectStoreContract;
using testing::Reply;
using testing::TempDir;

// Each contract test gets a fresh prefix on the shared server.
const testing::StoreBackend kS3{"S3", [](const std::string&) -> std::unique_ptr<ObjectStore> {
  S3Options o = testing::s3_options(testing::shared_s3_server().endpoint());
  o.list_page_size = 3;  // listings in the contract span several pages (continuation tokens)
  return std::make_unique<S3Store>(testing::fresh_s3_uri("contract"), o, testing::s3_credentials());
}};
INSTANTIATE_TEST_SUITE_P(S3, ObjectStoreContract, ::testing::Values(kS3));

TEST(S3Store, MultipartParallelPartsRangedReadsAndAwsCliInterop) {
  auto& server = testing::shared_s3_server();
  LoopbackHttp proxy([](const testing::HttpExchange&) { return Reply::forward(); }, server.port());
  S3Options o = testing::s3_options(proxy.url());
  o.part_size = 16u << 20;
  o.concurrency = 4;
  TempDir tmp;
  std::string uri = testing::fresh_s3_uri("multipart");
  S3Store s(uri, o, testing::s3_credentials());
  const uint64_t size = 80ull << 20;  // > 64 MiB: five 16 MiB parts
  std::string src = tmp.file("big.bin");
  std::string sha = testing::write_random_file(src, size, 42);
  s.put_file("big/object.bin", src);

  int creates = 0, parts = 0, completes = 0;
  for (const auto& ex : proxy.log()) {
    if (ex.method == "POST" && ex.has("uploads")) ++creates;
    if (ex.method == "PUT" && ex.has("partNumber=")) ++parts;
    if (ex.method == "POST" && ex.has("uploadId=")) ++completes;
  }
  EXPECT_EQ(creates, 1);
  EXPECT_EQ(parts, 5);
  EXPECT_EQ(completes, 1);
  EXPECT_GE(proxy.max_in_flight(), 2) << "parts were not uploaded in parallel";
  auto h = s.head("big/object.bin");
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->size, size);

  // Parallel ranged download and single ranged reads across a part boundary.
  int64_t before = proxy.requests();
  std::string dst = tmp.file("back.bin");
  s.get_file("big/object.bin", dst);
  EXPECT_EQ(io::sha256_file_hex(dst), sha);
  int ranged = 0;
  auto log = proxy.log();
  for (size_t i = static_cast<size_t>(before); i < log.size(); ++i) {
    if (log[i].method == "GET" && log[i].headers.count("range")) ++ranged;
  }
  EXPECT_EQ(ranged, 5);
  std::string local = testing::read_file(src);
  uint64_t boundary = 16ull << 20;
  EXPECT_EQ(s.get_range("big/object.bin", boundary - 5, 10), local.substr(boundary - 5, 10));
  EXPECT_EQ(s.get_range("big/object.bin", size - 3, 100), local.substr(size - 3));

  // The AWS CLI reads what moerl wrote (the multipart object)...
  std::string key = uri.substr(std::string("s3://").size()) + "/big/object.bin";
  std::string by_aws = tmp.file("by-aws.bin");
  ASSERT_EQ(testing::run_aws(server, {"s3", "cp", "s3://" + key, by_aws}), 0);
  EXPECT_EQ(io::sha256_file_hex(by_aws), sha);
  // ...and moerl reads what the AWS CLI wrote (12 MiB: a multipart upload by the CLI).
  std::string aws_src = tmp.file("aws-src.bin");
  std::string aws_sha = testing::write_random_file(aws_src, 12u << 20, 43);
  std::string aws_key = uri.substr(std::string("s3://").size()) + "/from-aws/file.bin";
  ASSERT_EQ(testing::run_aws(server, {"s3", "cp", aws_src, "s3://" + aws_key}), 0);
  std::string got = tmp.file("got.bin");
  s.get_file("from-aws/file.bin", got);
  EXPECT_EQ(io::sha256_file_hex(got), aws_sha);
  auto listed = s.list("");
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[1].key, "from-aws/file.bin");
  EXPECT_EQ(listed[1].size, 12u << 20);
}

TEST(S3Store, WrongSecretIsRejectedBySignatureCheck) {
  auto& server = testing::shared_s3_server();
  S3Store s(testing::fresh_s3_uri("badsig"), testing::s3_options(server.endpoint()),
            std::make_shared<StaticCredentials>(Credentials{"S3RVER", "not-the-secret", "", {}, "test"}));
  try {
    s.put("k", "v");
    ADD_FAILURE() << "a request signed with the wrong secret was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("SignatureDoesNotMatch"), std::string::npos) << e.what();
  }
}

// s3rver signs virtual-hosted requests as "/bucket/key" (unlike AWS, whose examples above
// sign "/key"), so this endpoint records the request and checks the signature itself.
TEST(S3Store, VirtualHostedAddressingAndSessionToken) {
  std::mutex mu;
  std::vector<testing::HttpExchange> seen;
  LoopbackHttp endpoint([&](const testing::HttpExchange& ex) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(ex);
    return Reply::respond(200, "", {{"ETag", "\"abc\""}});
  });
  S3Options o = testing::s3_options("http://s3.localhost:" + std::to_string(endpoint.port()));
  o.addressing = Addressing::kVirtual;
  S3Store s("s3://moerl-test/run 1", o,
            std::make_shared<StaticCredentials>(Credentials{"AKIDEXAMPLE", "secret/key", "session-token-value", {}, "test"}));
  EXPECT_FALSE(s.client().endpoint().path_style);
  s.put("a/b+c.txt", "virtual");
  ASSERT_EQ(seen.size(), 1u);
  const auto& ex = seen[0];
  EXPECT_EQ(ex.method, "PUT");
  EXPECT_EQ(ex.target, "/run%201/a/b%2Bc.txt");
  EXPECT_EQ(ex.headers.at("host"), "moerl-test.s3.localhost:" + std::to_string(endpoint.port()));
  EXPECT_EQ(ex.headers.at("x-amz-security-token"), "session-token-value");
  EXPECT_EQ(ex.headers.at("x-amz-content-sha256"), io::sha256_hex("virtual"));
  // Recompute the signature from what arrived, as S3 does.
  std::string auth = ex.headers.at("authorization");
  std::string signed_list = auth.substr(auth.find("SignedHeaders=") + 14);
  signed_list = signed_list.substr(0, signed_list.find(','));
  EXPECT_EQ(signed_list, "host;x-amz-content-sha256;x-amz-date;x-amz-security-token");
  Params headers;
  for (const char* h : {"host", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"}) {
    headers.push_back({h, ex.headers.at(h)});
  }
  Signature sig = sign_v4({"PUT", ex.target, {}, headers, io::sha256_hex("virtual")},
                          Credentials{"AKIDEXAMPLE", "secret/key", "", {}, ""}, "us-east-1", "s3",
                          ex.headers.at("x-amz-date"));
  EXPECT_EQ(auth, sig.authorization);
  EXPECT_NE(auth.find("Credential=AKIDEXAMPLE/"), std::string::npos);
  EXPECT_EQ(auth.find("secret/key"), std::string::npos);
}

TEST(S3Store, FailedMultipartIsAbortedAndCleanupAbortsOrphans) {
  auto& server = testing::shared_s3_server();
  std::atomic<bool> block_abort{false};
  LoopbackHttp proxy(
      [&](const testing::HttpExchange& ex) {
        if (ex.method == "PUT" && ex.has("partNumber=2&")) {
          return Reply::respond(400, "<Error><Code>InvalidArgument</Code><Message>injected</Message></Error>");
        }
        if (ex.method == "DELETE" && ex.has("uploadId=") && block_abort) {
          return Reply::respond(403, "<Error><Code>AccessDenied</Code><Message>injected</Message></Error>");
        }
        return Reply::forward();
      },
      server.port());
  S3Options o = testing::s3_options(proxy.url());
  o.part_size = 5u << 20;
  o.multipart_threshold = 5u << 20;
  o.concurrency = 2;
  TempDir tmp;
  std::string uri = testing::fresh_s3_uri("abort");
  S3Store s(uri, o, testing::s3_credentials());
  S3Store direct(uri, testing::s3_options(server.endpoint()), testing::s3_credentials());
  std::string src = tmp.file("f.bin");
  testing::write_random_file(src, 12u << 20, 7);
  std::string root = testing::bucket_key(uri);
  EXPECT_THROW(s.put_file("ckpt/step-1/model.bin", src), Error);
  EXPECT_TRUE(testing::server_uploads(root + "/").empty()) << "the failed upload was not aborted";
  EXPECT_TRUE(testing::server_keys(root + "/").empty()) << "its marker was left behind";
  EXPECT_FALSE(direct.head("ckpt/step-1/model.bin").has_value());

  // When the abort itself fails (the process "dies"), cleanup() aborts the orphan later.
  block_abort = true;
  EXPECT_THROW(s.put_file("ckpt/step-1/model.bin", src), Error);
  auto pending = direct.list_pending("ckpt/");
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].key, "ckpt/step-1/model.bin");
  EXPECT_GT(pending[0].initiated_unix, 1600000000);
  direct.put("ckpt/step-1/orphan-shard", "x");
  EXPECT_TRUE(cleanup(direct, "ckpt", 3600).aborted_uploads.empty());  // too young
  auto report = cleanup(direct, "ckpt", -10);
  EXPECT_EQ(report.aborted_uploads, (std::vector<std::string>{"ckpt/step-1/model.bin"}));
  EXPECT_EQ(report.removed_objects, (std::vector<std::string>{"ckpt/step-1/orphan-shard"}));
  EXPECT_TRUE(direct.list_pending("").empty());
  EXPECT_TRUE(testing::server_uploads(root + "/").empty());
  // Aborting twice is fine (NoSuchUpload is success).
  EXPECT_NO_THROW(direct.abort_pending(pending[0]));
}

TEST(S3Commit, CrashBetweenShardsAndManifestThenResume) {
  auto& server = testing::shared_s3_server();
  TempDir tmp;
  auto s3 = std::make_shared<S3Store>(testing::fresh_s3_uri("commit"), testing::s3_options(server.endpoint()),
                                      testing::s3_credentials());
  std::string model = tmp.file("model.bin");
  std::string sha = testing::write_random_file(model, 6u << 20, 99);
  {
    CommitWriter w(*s3, "ckpt/step-000001");
    w.put_file("model.safetensors", model);
    w.commit({{"step", 1}});
  }
  // Version 2 dies after its two shards, before the manifest.
  FaultInjectingStore crashing(s3, {.crash_after_writes = 2});
  CommitWriter w(crashing, "ckpt/step-000002");
  w.put_file("model.safetensors", model);
  w.put_bytes("optimizer.bin", testing::random_bytes(100000, 5));
  EXPECT_THROW(w.commit({{"step", 2}}), Error);
  EXPECT_TRUE(s3->head("ckpt/step-000002/optimizer.bin").has_value());  // shards landed...
  auto r = CommitReader::latest(*s3, "ckpt");                           // ...but readers ignore them
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->manifest().extra["step"], 1);
  r->get_file("model.safetensors", tmp.file("restored.bin"));
  EXPECT_EQ(io::sha256_file_hex(tmp.file("restored.bin")), sha);
  EXPECT_EQ(cleanup(*s3, "ckpt", -10).removed_objects.size(), 2u);
  // The restarted writer commits version 2; its manifest is a conditional create.
  CommitWriter again(*s3, "ckpt/step-000002");
  again.put_bytes("optimizer.bin", "opt");
  again.commit({{"step", 2}});
  EXPECT_EQ(CommitReader::latest(*s3, "ckpt")->manifest().extra["step"], 2);
  EXPECT_EQ(s3->put_if_absent("ckpt/step-000002/manifest.moerl.json", "{}"), PutOutcome::kAlreadyExists);
}

}  // namespace
}  // namespace moerl::store::s3
