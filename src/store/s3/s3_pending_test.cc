// S3Store's unfinished uploads are found through upload markers (upload_marker.h), never with
// ListMultipartUploads, which the job's IAM policy cannot grant on a prefix: every store here
// talks through ScopedIamProxy, which refuses that call with 403 AccessDenied and counts it.
// What the server really holds is read past S3Store (server_keys / server_uploads).
#include <gtest/gtest.h>

#include <ctime>

#include "base/error.h"
#include "store/commit.h"
#include "store/s3/s3_store.h"
#include "store/s3/upload_marker.h"
#include "store/testing/s3_env.h"
#include "store/testing/test_util.h"

namespace moerl::store::s3 {
namespace {

using testing::ScopedIamProxy;
using testing::server_keys;
using testing::server_uploads;
using testing::TempDir;

S3Options multipart_options(const ScopedIamProxy& proxy) {
  S3Options o = testing::s3_options(proxy.url());
  o.part_size = 5u << 20;
  o.multipart_threshold = 5u << 20;  // 12 MiB files go up in three parts
  o.concurrency = 2;
  return o;
}

using Uploads = std::vector<std::pair<std::string, std::string>>;

TEST(S3Pending, CleanupAbortsAnOrphanedUploadWithoutListMultipartUploads) {
  ScopedIamProxy proxy;
  TempDir tmp;
  std::string uri = testing::fresh_s3_uri("orphan");
  std::string root = testing::bucket_key(uri);
  S3Store s(uri, multipart_options(proxy), testing::s3_credentials());
  std::string src = tmp.file("f.bin");
  testing::write_random_file(src, 12u << 20, 11);

  // A writer whose upload fails and whose abort fails too: the upload outlives it.
  proxy.fail_part_2 = true;
  proxy.refuse_abort = true;
  EXPECT_THROW(s.put_file("ckpt/step-1/model.bin", src), Error);
  Uploads on_server = server_uploads(root + "/");
  ASSERT_EQ(on_server.size(), 1u);
  EXPECT_EQ(on_server[0].first, root + "/ckpt/step-1/model.bin");

  // Its marker is hidden from listings, so commits, retention and `moerl store ls` never see it.
  EXPECT_TRUE(s.list("").empty());
  auto pending = s.list_pending("ckpt/");
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].key, "ckpt/step-1/model.bin");
  EXPECT_EQ(pending[0].upload_id, on_server[0].second);
  EXPECT_NEAR(static_cast<double>(pending[0].initiated_unix), static_cast<double>(std::time(nullptr)), 120);
  EXPECT_EQ(s.list_pending("ckpt/step-1/mod").size(), 1u) << "a prefix that ends mid-name";
  EXPECT_TRUE(s.list_pending("ckpt/step-1/other").empty());
  EXPECT_TRUE(s.list_pending("weights/").empty());
  // A store rooted at the bucket, as `moerl store cleanup s3://bucket/...` opens it, finds it too.
  S3Store at_bucket(std::string("s3://") + testing::S3TestServer::kBucket, multipart_options(proxy),
                    testing::s3_credentials());
  auto from_bucket = at_bucket.list_pending(root + "/ckpt/");
  ASSERT_EQ(from_bucket.size(), 1u);
  EXPECT_EQ(from_bucket[0].key, root + "/ckpt/step-1/model.bin");

  s.put("ckpt/step-1/orphan-shard", "x");
  EXPECT_TRUE(cleanup(s, "ckpt", 3600).aborted_uploads.empty());  // too young
  proxy.refuse_abort = false;
  auto report = cleanup(s, "ckpt", -10);
  EXPECT_EQ(report.aborted_uploads, (std::vector<std::string>{"ckpt/step-1/model.bin"}));
  EXPECT_EQ(report.removed_objects, (std::vector<std::string>{"ckpt/step-1/orphan-shard"}));
  EXPECT_TRUE(server_uploads(root + "/").empty());
  EXPECT_TRUE(server_keys(root + "/").empty()) << "the marker outlived its upload";
  EXPECT_EQ(proxy.list_uploads_refused(), 0) << "the janitor called ListMultipartUploads";
}

TEST(S3Pending, MarkerLivesExactlyAsLongAsItsUpload) {
  ScopedIamProxy proxy;
  TempDir tmp;
  std::string uri = testing::fresh_s3_uri("marker");
  std::string root = testing::bucket_key(uri);
  S3Store s(uri, multipart_options(proxy), testing::s3_credentials());
  std::string src = tmp.file("f.bin");
  testing::write_random_file(src, 12u << 20, 12);

  // Create, marker, parts, Complete, marker gone.
  s.put_file("w/v1/model.bin", src);
  int64_t create = -1, marker_put = -1, first_part = -1, complete = -1, marker_delete = -1;
  for (const auto& ex : proxy.log()) {
    bool marker = ex.target.find("/.model.bin.moerl-upload-") != std::string::npos;
    if (ex.method == "POST" && ex.has("?uploads")) create = ex.index;
    if (ex.method == "PUT" && marker) marker_put = ex.index;
    if (ex.method == "PUT" && ex.has("partNumber=") && first_part < 0) first_part = ex.index;
    if (ex.method == "POST" && ex.has("uploadId=")) complete = ex.index;
    if (ex.method == "DELETE" && marker) marker_delete = ex.index;
  }
  EXPECT_GE(create, 0);
  EXPECT_GT(marker_put, create);
  EXPECT_GT(first_part, marker_put) << "a part went up before the upload had a marker";
  EXPECT_GT(marker_delete, complete);
  EXPECT_EQ(server_keys(root + "/"), (std::vector<std::string>{root + "/w/v1/model.bin"}));
  EXPECT_TRUE(server_uploads(root + "/").empty());

  // A failed upload is aborted together with its marker.
  proxy.fail_part_2 = true;
  EXPECT_THROW(s.put_file("w/v2/model.bin", src), Error);
  EXPECT_TRUE(server_uploads(root + "/").empty());
  EXPECT_EQ(server_keys(root + "/"), (std::vector<std::string>{root + "/w/v1/model.bin"}));

  // The marker names its upload (docs/formats/store_commit.md, "Upload markers").
  proxy.refuse_abort = true;
  EXPECT_THROW(s.put_file("w/v3/model.bin", src), Error);
  Uploads on_server = server_uploads(root + "/");
  auto keys = server_keys(root + "/w/v3/");
  ASSERT_EQ(on_server.size(), 1u);
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0], upload_marker_key(root + "/w/v3/model.bin", on_server[0].second));
  S3Store at_bucket(std::string("s3://") + testing::S3TestServer::kBucket, multipart_options(proxy),
                    testing::s3_credentials());
  UploadMarker m = UploadMarker::parse(at_bucket.get(keys[0]), keys[0]);
  EXPECT_EQ(m.key, root + "/w/v3/model.bin");
  EXPECT_EQ(m.upload_id, on_server[0].second);
  EXPECT_NEAR(static_cast<double>(m.initiated_unix), static_cast<double>(std::time(nullptr)), 120);
  proxy.refuse_abort = false;
  auto pending = s.list_pending("w/");
  ASSERT_EQ(pending.size(), 1u);
  s.abort_pending(pending[0]);
  EXPECT_TRUE(server_uploads(root + "/").empty());
  EXPECT_TRUE(server_keys(root + "/w/v3/").empty());
  EXPECT_NO_THROW(s.abort_pending(pending[0])) << "aborting twice is fine";

  // A marker whose upload is gone (its delete failed after Complete) is removed by the janitor;
  // a damaged one is left alone, with a warning, and does not stop the others.
  std::string gone = root + "/w/v4/model.bin";
  at_bucket.put(upload_marker_key(gone, "0123abcd"), UploadMarker{gone, "0123abcd", 1700000000}.to_json());
  at_bucket.put(upload_marker_key(root + "/w/v5/model.bin", "x"), "not a marker");
  pending = s.list_pending("w/");
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].key, "w/v4/model.bin");
  auto report = cleanup(s, "w", -10);
  EXPECT_EQ(report.aborted_uploads, (std::vector<std::string>{"w/v4/model.bin"}));
  EXPECT_TRUE(server_keys(root + "/w/v4/").empty());
  EXPECT_EQ(server_keys(root + "/w/v5/").size(), 1u);
  EXPECT_EQ(proxy.list_uploads_refused(), 0);
}

}  // namespace
}  // namespace moerl::store::s3
