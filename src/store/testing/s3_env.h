// Shared setup for the S3 tests: one S3 test server per test binary, options and dummy
// credentials for it, fresh per-test prefixes, and the AWS CLI as the reference client.
// Also turns instance-metadata lookups off for the whole test binary (no test may reach
// 169.254.169.254). Test-only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "store/object_store.h"
#include "store/s3/credentials.h"
#include "store/testing/loopback_http.h"

namespace moerl::store::testing {

S3TestServer& shared_s3_server();
S3Options s3_options(const std::string& endpoint);
std::shared_ptr<s3::CredentialsProvider> s3_credentials();
std::string fresh_s3_uri(const std::string& tag);  // s3://moerl-test/<tag>-<pid>-<n>
// Runs `aws --endpoint-url ... ARGS` with the server's dummy credentials; returns its exit
// status. Error(kTimeout) if it runs past 300 s.
int run_aws(const S3TestServer& server, const std::vector<std::string>& args);

}  // namespace moerl::store::testing
