// Shared setup for the S3 tests: one S3 test server per test binary, options and dummy
// credentials for it, fresh per-test prefixes, the AWS CLI as the reference client, what the
// server holds (read past S3Store), and a proxy that refuses what the job's IAM policy does.
// Also turns instance-metadata lookups off for the whole test binary (no test may reach
// 169.254.169.254). Test-only.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "store/object_store.h"
#include "store/s3/credentials.h"
#include "store/testing/loopback_http.h"

namespace moerl::store::testing {

S3TestServer& shared_s3_server();
S3Options s3_options(const std::string& endpoint);
std::shared_ptr<s3::CredentialsProvider> s3_credentials();
std::string fresh_s3_uri(const std::string& tag);  // s3://moerl-test/<tag>-<pid>-<n>
std::string bucket_key(const std::string& uri);    // s3://moerl-test/K -> K
// Runs `aws --endpoint-url ... ARGS` with the server's dummy credentials; returns its exit
// status. Error(kTimeout) if it runs past 300 s.
int run_aws(const S3TestServer& server, const std::vector<std::string>& args);

// What the shared server holds under a bucket prefix, read with a direct client (S3Store hides
// upload markers and finds uploads only through them): every object key, and every pending
// multipart upload as (key, upload id); both sorted.
std::vector<std::string> server_keys(const std::string& bucket_prefix);
std::vector<std::pair<std::string, std::string>> server_uploads(const std::string& bucket_prefix);

// A proxy in front of the shared server that answers ListMultipartUploads with 403
// AccessDenied and counts it: the job's IAM policy cannot grant that action on a prefix, so
// it does not grant it (docs/deploy-security.md). fail_part_2 fails UploadPart number 2 (a
// writer's upload fails); refuse_abort answers AbortMultipartUpload with 403 (its abort
// fails too, as when the writer dies). Thread-safe.
class ScopedIamProxy {
 public:
  ScopedIamProxy();
  std::string url() const { return http_.url(); }
  int list_uploads_refused() const { return list_uploads_refused_.load(); }
  std::vector<HttpExchange> log() const { return http_.log(); }

  std::atomic<bool> fail_part_2{false};
  std::atomic<bool> refuse_abort{false};

 private:
  std::atomic<int> list_uploads_refused_{0};
  LoopbackHttp http_;  // last: its handler uses the members above
};

}  // namespace moerl::store::testing
