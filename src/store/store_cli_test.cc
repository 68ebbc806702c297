// `moerl store ls|cp|rm|verify|cleanup` end to end: the moerl binary (MOERL_BIN) against the
// S3 test server and local directories; exit codes 0 on success, 2 with a clear message
// otherwise.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>

#include "base/error.h"
#include "io/checksum.h"
#include "store/commit.h"
#include "store/local_store.h"
#include "store/s3/s3_store.h"
#include "store/testing/s3_env.h"
#include "store/testing/test_util.h"

namespace moerl::store {
namespace {

using testing::TempDir;

struct CliRun {
  int code;
  std::string out, err;
};

CliRun moerl(const std::string& args, const TempDir& tmp) {
  const char* bin = std::getenv("MOERL_BIN");
  std::string cmd = std::string("AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1 "
                                "AWS_EC2_METADATA_DISABLED=true '") +
                    bin + "' store " + args + " >" + tmp.file("out") + " 2>" + tmp.file("err");
  int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : 128, testing::read_file(tmp.file("out")), testing::read_file(tmp.file("err"))};
}

TEST(StoreCli, CopyListRemoveBetweenLocalAndS3) {
  const char* bin = std::getenv("MOERL_BIN");
  if (!bin || !std::filesystem::exists(bin)) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  auto& server = testing::shared_s3_server();
  std::string ep = " --endpoint " + server.endpoint() + " ";
  TempDir tmp;
  std::filesystem::create_directories(tmp.file("src/sub"));
  std::string sha_a = testing::write_random_file(tmp.file("src/a.bin"), 6u << 20, 1);
  testing::write_file(tmp.file("src/sub/b.txt"), "bee");
  std::string base = testing::fresh_s3_uri("cli");

  CliRun r = moerl("cp -r" + ep + tmp.file("src") + " " + base + "/dir", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("copied 2 objects"), std::string::npos) << r.out;
  r = moerl("ls" + ep + base + "/", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" 6291456  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/dir/a.bin\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/dir/sub/b.txt\n"), std::string::npos) << r.out;

  std::filesystem::create_directories(tmp.file("back"));
  r = moerl("cp" + ep + base + "/dir/a.bin " + tmp.file("back") + "/", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(io::sha256_file_hex(tmp.file("back/a.bin")), sha_a);
  r = moerl("cp -r" + ep + base + "/dir " + tmp.file("tree"), tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(testing::read_file(tmp.file("tree/sub/b.txt")), "bee");

  r = moerl("rm" + ep + base + "/dir/missing.bin", tmp);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no object"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("HINT"), std::string::npos) << r.err;
  r = moerl("rm" + ep + base + "/dir", tmp);  // a prefix without -r
  EXPECT_EQ(r.code, 2) << r.err;
  r = moerl("rm -r" + ep + base + "/dir", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("removed 2 objects"), std::string::npos) << r.out;
  r = moerl("ls" + ep + base + "/", tmp);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "");

  r = moerl("cp" + ep + tmp.file("nope.bin") + " " + base + "/x", tmp);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("nope.bin"), std::string::npos) << r.err;
  r = moerl("cp" + ep + tmp.file("src/a.bin") + " gs://bucket/x", tmp);
  EXPECT_EQ(r.code, 2);
  r = moerl("frobnicate x", tmp);
  EXPECT_EQ(r.code, 2);
}

TEST(StoreCli, VerifyAndCleanupOnALocalCommit) {
  const char* bin = std::getenv("MOERL_BIN");
  if (!bin || !std::filesystem::exists(bin)) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  TempDir tmp, root;
  LocalStore s(root.path());
  CommitWriter w(s, "ckpt/step-000001");
  w.put_bytes("weights.bin", testing::random_bytes(4096, 9));
  w.commit();
  s.put("ckpt/step-000002/orphan.bin", "x");
  CliRun r = moerl("verify " + root.path() + "/ckpt/step-000001", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1 shards, 4096 bytes"), std::string::npos) << r.out;
  r = moerl("verify " + root.path() + "/ckpt/step-000002", tmp);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not a committed version"), std::string::npos) << r.err;
  r = moerl("cleanup --grace-s -10 " + root.path() + "/ckpt", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1 objects removed"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(root.path() + "/ckpt/step-000002/orphan.bin"));
}

// The S3 janitor under the job's IAM policy, which cannot grant ListMultipartUploads on a
// prefix: the proxy refuses that call, and cleanup still aborts the orphaned upload.
TEST(StoreCli, CleanupOnS3AbortsOrphanedUploadsWithoutListingUploads) {
  const char* bin = std::getenv("MOERL_BIN");
  if (!bin || !std::filesystem::exists(bin)) GTEST_SKIP() << "MOERL_BIN not built (run through ctest)";
  testing::ScopedIamProxy proxy;
  TempDir tmp;
  std::string uri = testing::fresh_s3_uri("cli-cleanup");
  std::string root = testing::bucket_key(uri);
  S3Options o = testing::s3_options(proxy.url());
  o.part_size = 5u << 20;
  o.multipart_threshold = 5u << 20;
  s3::S3Store s(uri, o, testing::s3_credentials());
  testing::write_random_file(tmp.file("f.bin"), 12u << 20, 3);
  proxy.fail_part_2 = true;
  proxy.refuse_abort = true;  // the writer's own abort fails: the upload is orphaned
  EXPECT_THROW(s.put_file("ckpt/step-1/model.bin", tmp.file("f.bin")), Error);
  ASSERT_EQ(testing::server_uploads(root + "/").size(), 1u);
  proxy.refuse_abort = false;

  CliRun r = moerl("cleanup --endpoint " + proxy.url() + " --grace-s -10 " + uri + "/ckpt", tmp);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("aborted upload of " + root + "/ckpt/step-1/model.bin\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 uploads aborted"), std::string::npos) << r.out;
  EXPECT_TRUE(testing::server_uploads(root + "/").empty());
  EXPECT_TRUE(testing::server_keys(root + "/").empty()) << "the upload's marker was left behind";
  EXPECT_EQ(proxy.list_uploads_refused(), 0);
}

}  // namespace
}  // namespace moerl::store
