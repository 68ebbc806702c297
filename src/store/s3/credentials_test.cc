// The AWS credentials chain: each source against a loopback stand-in for its service (STS,
// the container agent, IMDSv2), the order between sources, caching and refresh of temporary
// credentials, and that secrets stay out of error messages.
#include "store/s3/credentials.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <map>

#include "base/error.h"
#include "store/s3/sigv4.h"
#include "store/testing/loopback_http.h"
#include "store/testing/test_util.h"

namespace moerl::store::s3 {
namespace {

using testing::HttpExchange;
using testing::LoopbackHttp;
using testing::Reply;
using testing::TempDir;

const char* kAllVars[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ROLE_ARN",
                          "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_SESSION_NAME", "AWS_ENDPOINT_URL_STS",
                          "AWS_ENDPOINT_URL", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                          "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                          "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE", "AWS_PROFILE",
                          "AWS_EC2_METADATA_DISABLED", "AWS_EC2_METADATA_SERVICE_ENDPOINT", "HOME"};

// Clears every variable the chain reads (IMDS disabled) and restores them afterwards.
class CleanEnv {
 public:
  CleanEnv() {
    for (const char* v : kAllVars) {
      if (const char* cur = std::getenv(v)) saved_[v] = cur;
      ::unsetenv(v);
    }
    ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
  }
  ~CleanEnv() {
    for (const char* v : kAllVars) ::unsetenv(v);
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  void set(const char* k, const std::string& v) { ::setenv(k, v.c_str(), 1); }

 private:
  std::map<std::string, std::string> saved_;
};

std::string iso8601(int64_t t) {
  char buf[32];
  std::time_t tt = static_cast<std::time_t>(t);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&tt));
  return buf;
}

TEST(Credentials, EnvironmentAndSharedFileInAwsOrder) {
  CleanEnv env;
  TempDir tmp;
  EXPECT_FALSE(credentials_from_env().has_value());
  testing::write_file(tmp.file("credentials"),
                      "[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = file-secret\n\n"
                      "# comment\n[other]\naws_access_key_id=AKIDOTHER\naws_secret_access_key=other-secret\n"
                      "aws_session_token = tok-other\n");
  env.set("AWS_SHARED_CREDENTIALS_FILE", tmp.file("credentials"));
  auto f = credentials_from_shared_file();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->access_key_id, "AKIDFILE");
  EXPECT_EQ(f->secret_access_key, "file-secret");
  env.set("AWS_PROFILE", "other");
  f = credentials_from_shared_file();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->access_key_id, "AKIDOTHER");
  EXPECT_EQ(f->session_token, "tok-other");
  EXPECT_EQ(f->source, "shared-file:other");
  EXPECT_EQ(ChainCredentials("us-east-1").get().access_key_id, "AKIDOTHER");

  // Environment variables come first.
  env.set("AWS_ACCESS_KEY_ID", "AKIDENV");
  env.set("AWS_SECRET_ACCESS_KEY", "env-secret");
  env.set("AWS_SESSION_TOKEN", "env-token");
  Credentials c = ChainCredentials("us-east-1").get();
  EXPECT_EQ(c.access_key_id, "AKIDENV");
  EXPECT_EQ(c.session_token, "env-token");
  EXPECT_EQ(c.source, "env");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  EXPECT_THROW(credentials_from_env(), Error);
}

TEST(Credentials, NoneFoundIsAClearError) {
  CleanEnv env;
  try {
    ChainCredentials("us-east-1").get();
    ADD_FAILURE() << "credentials out of nowhere";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("HINT"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("web identity"), std::string::npos);
  }
}

TEST(Credentials, WebIdentityViaStsComesBeforeContainerAndFile) {
  CleanEnv env;
  TempDir tmp;
  testing::write_file(tmp.file("token"), "eyJ.web-identity.token\n");
  int64_t expires = std::time(nullptr) + 3600;
  LoopbackHttp sts([&](const HttpExchange& ex) {
    bool ok = ex.method == "POST" && ex.body.find("Action=AssumeRoleWithWebIdentity") != std::string::npos &&
              ex.body.find("RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Ftrainer") != std::string::npos &&
              ex.body.find("WebIdentityToken=eyJ.web-identity.token") == ex.body.size() - 39 &&
              ex.body.find("RoleSessionName=pod-7") != std::string::npos;
    if (!ok) return Reply::respond(400, "<ErrorResponse><Error><Code>InvalidParameter</Code><Message>bad</Message></Error></ErrorResponse>");
    return Reply::respond(200,
                          "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
                          "<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIASTS</AccessKeyId>"
                          "<SecretAccessKey>sts-secret</SecretAccessKey><SessionToken>sts-token</SessionToken>"
                          "<Expiration>" + iso8601(expires) + "</Expiration></Credentials>"
                          "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>");
  }, 0, /*decide_after_body=*/true);
  env.set("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/trainer");
  env.set("AWS_WEB_IDENTITY_TOKEN_FILE", tmp.file("token"));
  env.set("AWS_ROLE_SESSION_NAME", "pod-7");
  env.set("AWS_ENDPOINT_URL_STS", sts.url());
  env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:1/never-asked");
  Credentials c = ChainCredentials("us-west-2").get();
  EXPECT_EQ(c.access_key_id, "ASIASTS");
  EXPECT_EQ(c.secret_access_key, "sts-secret");
  EXPECT_EQ(c.session_token, "sts-token");
  EXPECT_EQ(c.expires_unix, expires);
  EXPECT_EQ(c.source, "web-identity");

  env.set("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/other");
  try {
    ChainCredentials("us-west-2").get();
    ADD_FAILURE() << "STS rejection not reported";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("InvalidParameter"), std::string::npos) << m;
    EXPECT_EQ(m.find("eyJ.web-identity.token"), std::string::npos) << "token leaked: " << m;
  }
}

TEST(Credentials, ContainerCredentialsAreCachedUntilNearExpiry) {
  CleanEnv env;
  TempDir tmp;
  testing::write_file(tmp.file("auth"), "pod-identity-token");
  std::atomic<int64_t> expires{std::time(nullptr) + 3600};
  LoopbackHttp agent([&](const HttpExchange& ex) {
    if (ex.target != "/v1/credentials" || ex.headers.count("authorization") == 0 ||
        ex.headers.at("authorization") != "pod-identity-token") {
      return Reply::respond(401, "{}");
    }
    return Reply::respond(200, "{\"AccessKeyId\":\"ASIAPOD\",\"SecretAccessKey\":\"pod-secret\",\"Token\":\"pod-token\","
                               "\"Expiration\":\"" + iso8601(expires.load()) + "\"}");
  });
  env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", agent.url() + "/v1/credentials");
  env.set("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", tmp.file("auth"));
  ChainCredentials chain("us-east-1");
  EXPECT_EQ(chain.get().access_key_id, "ASIAPOD");
  EXPECT_EQ(chain.get().session_token, "pod-token");
  EXPECT_EQ(agent.requests(), 1);  // cached
  expires = std::time(nullptr) + 60;  // inside the 5-minute refresh margin
  chain.invalidate();
  chain.get();
  chain.get();
  EXPECT_EQ(agent.requests(), 3);  // near expiry: refreshed on every get
  env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.1.2.3/creds");
  http::HttpClient http;
  EXPECT_THROW(credentials_from_container(http), Error);  // refused before any connection
}

// A credentials service that fails for a moment is retried (as S3 calls are); while the
// cached temporary credentials are still valid, a failed refresh keeps them.
TEST(Credentials, RefreshRidesThroughAFailingCredentialsService) {
  CleanEnv env;
  std::atomic<int> failures{2};
  std::atomic<int64_t> expires{std::time(nullptr) + 200};  // inside the refresh margin
  LoopbackHttp agent([&](const HttpExchange&) {
    if (failures.fetch_sub(1) > 0) return Reply::respond(503, "busy");
    return Reply::respond(200, "{\"AccessKeyId\":\"ASIAPOD\",\"SecretAccessKey\":\"s\",\"Token\":\"t\","
                               "\"Expiration\":\"" + iso8601(expires.load()) + "\"}");
  });
  env.set("AWS_CONTAINER_CREDENTIALS_FULL_URI", agent.url() + "/v1/credentials");
  ChainCredentials chain("us-east-1");
  EXPECT_EQ(chain.get().access_key_id, "ASIAPOD");  // two 503s, then the answer
  EXPECT_EQ(agent.requests(), 3);
  failures = 1000;  // the agent is down now; the cached credentials have 200 s left
  EXPECT_EQ(chain.get().access_key_id, "ASIAPOD");
  EXPECT_EQ(agent.requests(), 4);
  chain.invalidate();  // nothing cached: a service down for good is an error after 4 tries
  try {
    chain.get();
    ADD_FAILURE() << "credentials from a service that is down";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("HTTP 503"), std::string::npos) << e.what();
  }
  EXPECT_EQ(agent.requests(), 8);
}

TEST(Credentials, InstanceMetadataV2) {
  CleanEnv env;
  LoopbackHttp imds([](const HttpExchange& ex) {
    if (ex.method == "PUT" && ex.target == "/latest/api/token" &&
        ex.headers.count("x-aws-ec2-metadata-token-ttl-seconds")) {
      return Reply::respond(200, "imds-session-token");
    }
    if (ex.headers.count("x-aws-ec2-metadata-token") == 0 || ex.headers.at("x-aws-ec2-metadata-token") != "imds-session-token") {
      return Reply::respond(401, "");
    }
    if (ex.target == "/latest/meta-data/iam/security-credentials/") return Reply::respond(200, "node-role\n");
    if (ex.target == "/latest/meta-data/iam/security-credentials/node-role") {
      return Reply::respond(200, "{\"Code\":\"Success\",\"AccessKeyId\":\"ASIANODE\",\"SecretAccessKey\":\"node-secret\","
                                 "\"Token\":\"node-token\",\"Expiration\":\"2099-01-01T00:00:00Z\"}");
    }
    return Reply::respond(404, "");
  });
  ::unsetenv("AWS_EC2_METADATA_DISABLED");
  env.set("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url());
  Credentials c = ChainCredentials("us-east-1").get();
  EXPECT_EQ(c.access_key_id, "ASIANODE");
  EXPECT_EQ(c.session_token, "node-token");
  EXPECT_EQ(c.source, "imds");
  EXPECT_EQ(c.expires_unix, parse_iso8601("2099-01-01T00:00:00Z"));
  EXPECT_EQ(imds.requests(), 3);
  env.set("AWS_EC2_METADATA_DISABLED", "true");
  http::HttpClient http;
  EXPECT_FALSE(credentials_from_imds(http).has_value());
}

TEST(Credentials, Iso8601) {
  EXPECT_EQ(parse_iso8601("2013-05-24T00:00:00Z"), 1369353600);
  EXPECT_EQ(parse_iso8601("2013-05-24T00:00:00.123Z"), 1369353600);
  EXPECT_FALSE(parse_iso8601("yesterday").has_value());
}

}  // namespace
}  // namespace moerl::store::s3
