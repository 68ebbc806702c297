// Shared S3 test setup (see s3_env.h).
#include "store/testing/s3_env.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "base/subprocess.h"

namespace moerl::store::testing {

namespace {
// NOTE: runs before any test: the credentials chain must never try the real IMDS address.
const bool kNoImds = [] {
  ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
  return true;
}();
}  // namespace

S3TestServer& shared_s3_server() {
  static std::unique_ptr<S3TestServer> server;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (!server) server = std::make_unique<S3TestServer>();
  return *server;
}

S3Options s3_options(const std::string& endpoint) {
  S3Options o;
  o.endpoint = endpoint;
  o.region = "us-east-1";
  o.addressing = Addressing::kPath;
  o.max_attempts = 8;
  o.base_backoff_s = 0.02;
  o.max_backoff_s = 0.2;
  o.request_deadline_s = 120;
  return o;
}

std::shared_ptr<s3::CredentialsProvider> s3_credentials() {
  return std::make_shared<s3::StaticCredentials>(
      s3::Credentials{S3TestServer::kKey, S3TestServer::kKey, "", std::nullopt, "test"});
}

std::string fresh_s3_uri(const std::string& tag) {
  static std::atomic<int> n{0};
  return std::string("s3://") + S3TestServer::kBucket + "/" + tag + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(n++);
}

int run_aws(const S3TestServer& server, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"aws", "--endpoint-url", server.endpoint(), "--region", "us-east-1",
                                   "--no-progress"};
  if (args.empty() || args[0] != "s3") argv.erase(argv.end() - 1);  // --no-progress is for `aws s3`
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnOptions o;
  o.set_env = {{"AWS_ACCESS_KEY_ID", S3TestServer::kKey},
               {"AWS_SECRET_ACCESS_KEY", S3TestServer::kKey},
               {"AWS_CONFIG_FILE", "/dev/null"},
               {"AWS_SHARED_CREDENTIALS_FILE", "/dev/null"},
               {"AWS_REQUEST_CHECKSUM_CALCULATION", "when_required"},
               {"AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required"},
               {"AWS_EC2_METADATA_DISABLED", "true"}};
  o.unset_env = {"AWS_SESSION_TOKEN", "AWS_PROFILE"};
  return Subprocess::spawn(argv, o).wait(Deadline::after_seconds(300));
}

}  // namespace moerl::store::testing
