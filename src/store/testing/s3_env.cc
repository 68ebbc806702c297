// Shared S3 test setup (see s3_env.h).
#include "store/testing/s3_env.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "base/subprocess.h"
#include "store/s3/s3_client.h"
#include "store/s3/xml.h"

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

std::string bucket_key(const std::string& uri) {
  const std::string head = std::string("s3://") + S3TestServer::kBucket + "/";
  return uri.rfind(head, 0) == 0 ? uri.substr(head.size()) : "";
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

namespace {
// A client straight to the shared server: no proxy, no S3Store in between.
s3::S3Client& direct_client() {
  static s3::S3Client client(s3_options(shared_s3_server().endpoint()), S3TestServer::kBucket, s3_credentials());
  return client;
}

s3::XmlNode get_listing(s3::S3Call c, const char* what) {
  s3::S3Result r = direct_client().execute(c);
  if (r.status != 200) direct_client().fail(c, r);
  return s3::parse_xml(r.body, what);
}
}  // namespace

std::vector<std::string> server_keys(const std::string& bucket_prefix) {
  std::vector<std::string> out;
  std::string token;
  while (true) {
    s3::S3Call c{"ListObjectsV2", "GET", "", {{"list-type", "2"}, {"prefix", bucket_prefix}}};
    if (!token.empty()) c.query.push_back({"continuation-token", token});
    s3::XmlNode doc = get_listing(c, "ListObjectsV2 response");
    for (const s3::XmlNode* o : doc.all("Contents")) out.push_back(o->text_of("Key"));
    token = doc.text_of("NextContinuationToken");
    if (doc.text_of("IsTruncated") != "true" || token.empty()) break;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<std::string, std::string>> server_uploads(const std::string& bucket_prefix) {
  // The test server answers every upload in one page (tools/s3/server.js).
  s3::XmlNode doc = get_listing(s3::S3Call{"ListMultipartUploads", "GET", "", {{"uploads", ""}, {"prefix", bucket_prefix}}},
                                "ListMultipartUploads response");
  std::vector<std::pair<std::string, std::string>> out;
  for (const s3::XmlNode* u : doc.all("Upload")) out.push_back({u->text_of("Key"), u->text_of("UploadId")});
  std::sort(out.begin(), out.end());
  return out;
}

static bool is_list_multipart_uploads(const HttpExchange& ex) {
  return ex.method == "GET" && (ex.has("?uploads") || ex.has("&uploads"));
}

ScopedIamProxy::ScopedIamProxy()
    : http_(
          [this](const HttpExchange& ex) {
            if (is_list_multipart_uploads(ex)) {
              ++list_uploads_refused_;
              return Reply::respond(403, "<Error><Code>AccessDenied</Code><Message>not granted by the job's IAM "
                                         "policy</Message></Error>");
            }
            if (fail_part_2 && ex.method == "PUT" && ex.has("partNumber=2&")) {
              return Reply::respond(400, "<Error><Code>InvalidArgument</Code><Message>injected</Message></Error>");
            }
            if (refuse_abort && ex.method == "DELETE" && ex.has("uploadId=")) {
              return Reply::respond(403, "<Error><Code>AccessDenied</Code><Message>injected</Message></Error>");
            }
            return Reply::forward();
          },
          shared_s3_server().port()) {}

}  // namespace moerl::store::testing
