// AWS credentials, resolved in the order the AWS CLI and SDKs use:
//   1. environment: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN)
//   2. web identity (EKS IRSA): AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE, exchanged with STS
//      AssumeRoleWithWebIdentity (endpoint AWS_ENDPOINT_URL_STS, AWS_ENDPOINT_URL, or regional)
//   3. container (EKS Pod Identity / ECS): AWS_CONTAINER_CREDENTIALS_FULL_URI (or _RELATIVE_URI)
//      with the token from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (or _TOKEN)
//   4. shared credentials file: AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, profile
//      AWS_PROFILE or "default"
//   5. instance metadata (IMDSv2: token PUT, then role credentials); AWS_EC2_METADATA_DISABLED
//      turns it off, AWS_EC2_METADATA_SERVICE_ENDPOINT moves it.
// Temporary credentials are cached and refreshed 5 minutes before they expire.
// Secrets never appear in errors or logs; only the source and the access key id do.
//
//   auto provider = default_credentials_provider("us-east-1");
//   Credentials c = provider->get();   // throws Error(kInvalidInput) with a HINT if none found
// Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/http_client.h"
#include "store/s3/sigv4.h"

namespace moerl::store::s3 {

class CredentialsProvider {
 public:
  virtual ~CredentialsProvider() = default;
  virtual Credentials get() = 0;
  // Drops cached credentials (after the server said they expired).
  virtual void invalidate() {}
};

// Fixed credentials (tests, explicit configuration).
class StaticCredentials : public CredentialsProvider {
 public:
  explicit StaticCredentials(Credentials c) : c_(std::move(c)) {}
  Credentials get() override { return c_; }

 private:
  Credentials c_;  // immutable
};

// The chain above, resolved lazily on first get() and cached.
class ChainCredentials : public CredentialsProvider {
 public:
  explicit ChainCredentials(std::string region);
  Credentials get() override;
  void invalidate() override;

 private:
  std::optional<Credentials> resolve();

  std::string region_;  // immutable
  http::HttpClient http_;
  std::mutex mu_;
  std::optional<Credentials> cached_;  // guarded by mu_
};

std::shared_ptr<CredentialsProvider> default_credentials_provider(const std::string& region);

// The individual sources (exposed for tests). Each returns nullopt when its source is not
// configured and throws Error when it is configured but fails.
std::optional<Credentials> credentials_from_env();
std::optional<Credentials> credentials_from_web_identity(http::HttpClient& http, const std::string& region);
std::optional<Credentials> credentials_from_container(http::HttpClient& http);
std::optional<Credentials> credentials_from_shared_file();
std::optional<Credentials> credentials_from_imds(http::HttpClient& http);

// "2026-01-02T03:04:05Z" (optionally with fractional seconds) -> unix seconds.
std::optional<int64_t> parse_iso8601(const std::string& s);

}  // namespace moerl::store::s3
