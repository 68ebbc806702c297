// The AWS credentials chain: env, web identity (STS), container, shared file, IMDSv2.
#include "store/s3/credentials.h"

#include <chrono>
#include <ctime>
#include <iomanip>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/env.h"
#include "base/error.h"
#include "base/log.h"
#include "store/s3/xml.h"

namespace moerl::store::s3 {

static constexpr int64_t kRefreshMarginS = 300;
// Tries of the chain when a credentials service fails (0.25 + 0.5 + 1 s of backoff between).
static constexpr int kRefreshAttempts = 4;

std::optional<int64_t> parse_iso8601(const std::string& s) {
  std::tm tm{};
  std::istringstream in(s);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  if (in.fail()) return std::nullopt;
  return static_cast<int64_t>(timegm(&tm));
}

static std::string read_text_file(const std::string& path, const char* what) {
  std::ifstream f(path);
  if (!f) {
    throw Error(std::string(what) + ": cannot read '" + path + "'", "check that the file exists and is readable");
  }
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::optional<Credentials> credentials_from_env() {
  auto id = env::get("AWS_ACCESS_KEY_ID");
  auto secret = env::get("AWS_SECRET_ACCESS_KEY");
  if (!id && !secret) return std::nullopt;
  if (!id || !secret) {
    throw Error(std::string("AWS credentials: ") + (id ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") +
                    " is missing while the other is set",
                "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither");
  }
  return Credentials{*id, *secret, env::get_or("AWS_SESSION_TOKEN", ""), std::nullopt, "env"};
}

static Error provider_error(const std::string& source, const std::string& why, const std::string& hint) {
  return Error("AWS credentials (" + source + "): " + why, hint, ErrorCode::kUnavailable);
}

std::optional<Credentials> credentials_from_web_identity(http::HttpClient& http, const std::string& region) {
  auto role = env::get("AWS_ROLE_ARN");
  auto token_file = env::get("AWS_WEB_IDENTITY_TOKEN_FILE");
  if (!role || !token_file) return std::nullopt;
  std::string token = read_text_file(*token_file, "AWS_WEB_IDENTITY_TOKEN_FILE");
  std::string endpoint = env::get_or("AWS_ENDPOINT_URL_STS", env::get_or("AWS_ENDPOINT_URL", ""));
  if (endpoint.empty()) endpoint = "https://sts." + region + ".amazonaws.com";
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  std::string session = env::get_or("AWS_ROLE_SESSION_NAME", "moerl-" + std::to_string(std::time(nullptr)));
  // AssumeRoleWithWebIdentity is an unsigned call: the web identity token is the proof.
  std::string body = canonical_query({{"Action", "AssumeRoleWithWebIdentity"},
                                      {"Version", "2011-06-15"},
                                      {"RoleArn", *role},
                                      {"RoleSessionName", session},
                                      {"WebIdentityToken", token}});
  http::HttpRequest req;
  req.method = "POST";
  req.url = endpoint + "/";
  req.headers = {{"Content-Type", "application/x-www-form-urlencoded"}};
  req.body = body;
  req.connect_timeout_s = 5;
  req.timeout_s = 30;
  http::HttpResponse r = http.perform(req);
  if (r.status != 200) {
    std::string why = r.status == 0 ? r.transport_error : "HTTP " + std::to_string(r.status);
    if (r.status != 0) {
      try {
        XmlNode e = parse_xml(r.body, "STS error");
        if (const XmlNode* err = e.find("Error")) why += " " + err->text_of("Code") + ": " + err->text_of("Message");
      } catch (const Error&) {
      }
    }
    throw provider_error("web identity", "STS AssumeRoleWithWebIdentity at " + endpoint + " for " + *role + " failed: " + why,
                         "check AWS_ROLE_ARN, the token file and the role's trust policy (IRSA)");
  }
  XmlNode doc = parse_xml(r.body, "STS AssumeRoleWithWebIdentity response");
  const XmlNode* c = doc.find("Credentials");
  if (!c || c->text_of("AccessKeyId").empty() || c->text_of("SecretAccessKey").empty()) {
    throw provider_error("web identity", "STS response has no Credentials", "check AWS_ENDPOINT_URL_STS");
  }
  return Credentials{c->text_of("AccessKeyId"), c->text_of("SecretAccessKey"), c->text_of("SessionToken"),
                     parse_iso8601(c->text_of("Expiration")), "web-identity"};
}

static Credentials credentials_from_json(const std::string& body, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const std::exception&) {
    throw provider_error(source, "response is not JSON", "check the credentials endpoint");
  }
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
  if (str("AccessKeyId").empty() || str("SecretAccessKey").empty()) {
    throw provider_error(source, "response has no AccessKeyId/SecretAccessKey", "check the credentials endpoint");
  }
  return Credentials{str("AccessKeyId"), str("SecretAccessKey"), str("Token"), parse_iso8601(str("Expiration")), source};
}

// Plain-http container endpoints must be on loopback or the ECS/EKS link-local agents.
static bool allowed_container_url(const std::string& url) {
  if (url.rfind("https://", 0) == 0) return true;
  if (url.rfind("http://", 0) != 0) return false;
  std::string host = url.substr(7, url.find_first_of(":/", 7) - 7);
  if (url.compare(7, 1, "[") == 0) host = url.substr(8, url.find(']') - 8);
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1" || host == "169.254.170.2" ||
         host == "169.254.170.23" || host == "fd00:ec2::23";
}

std::optional<Credentials> credentials_from_container(http::HttpClient& http) {
  std::string url;
  if (auto full = env::get("AWS_CONTAINER_CREDENTIALS_FULL_URI")) {
    url = *full;
  } else if (auto rel = env::get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")) {
    url = "http://169.254.170.2" + *rel;
  } else {
    return std::nullopt;
  }
  if (!allowed_container_url(url)) {
    throw Error("AWS_CONTAINER_CREDENTIALS_FULL_URI='" + url + "' is not https nor a loopback/agent address",
                "use the URI the EKS Pod Identity agent or ECS sets");
  }
  http::HttpRequest req;
  req.url = url;
  if (auto f = env::get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")) {
    req.headers.push_back({"Authorization", read_text_file(*f, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")});
  } else if (auto t = env::get("AWS_CONTAINER_AUTHORIZATION_TOKEN")) {
    req.headers.push_back({"Authorization", *t});
  }
  req.connect_timeout_s = 2;
  req.timeout_s = 10;
  http::HttpResponse r = http.perform(req);
  if (r.status != 200) {
    throw provider_error("container", "GET " + url + " failed: " + (r.status ? "HTTP " + std::to_string(r.status) : r.transport_error),
                         "check the Pod Identity association / task role and the token file");
  }
  return credentials_from_json(r.body, "container");
}

std::optional<Credentials> credentials_from_shared_file() {
  std::string path;
  if (auto p = env::get("AWS_SHARED_CREDENTIALS_FILE")) {
    path = *p;
  } else if (auto home = env::get("HOME")) {
    path = *home + "/.aws/credentials";
  } else {
    return std::nullopt;
  }
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::string profile = env::get_or("AWS_PROFILE", "default");
  std::string line, section;
  Credentials c;
  c.source = "shared-file:" + profile;
  bool found = false;
  auto trim = [](std::string s) {
    size_t b = s.find_first_not_of(" \t\r");
    size_t e = s.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  while (std::getline(f, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = trim(line.substr(1, line.size() - 2));
      continue;
    }
    if (section != profile) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = trim(line.substr(0, eq)), v = trim(line.substr(eq + 1));
    if (k == "aws_access_key_id") c.access_key_id = v, found = true;
    else if (k == "aws_secret_access_key") c.secret_access_key = v, found = true;
    else if (k == "aws_session_token") c.session_token = v;
  }
  if (!found) return std::nullopt;
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    throw Error("AWS credentials: profile [" + profile + "] in " + path + " lacks aws_access_key_id or aws_secret_access_key",
                "add both keys to the profile");
  }
  return c;
}

std::optional<Credentials> credentials_from_imds(http::HttpClient& http) {
  std::string disabled = env::get_or("AWS_EC2_METADATA_DISABLED", "false");
  if (disabled == "true" || disabled == "1") return std::nullopt;
  std::string base = env::get_or("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://169.254.169.254");
  while (!base.empty() && base.back() == '/') base.pop_back();
  http::HttpRequest tok;
  tok.method = "PUT";
  tok.url = base + "/latest/api/token";
  tok.headers = {{"X-aws-ec2-metadata-token-ttl-seconds", "21600"}};
  tok.connect_timeout_s = 1;
  tok.timeout_s = 2;
  http::HttpResponse t = http.perform(tok);
  if (t.status != 200) return std::nullopt;  // not on EC2 (or IMDS unreachable from this pod)
  http::HttpRequest req;
  req.url = base + "/latest/meta-data/iam/security-credentials/";
  req.headers = {{"X-aws-ec2-metadata-token", t.body}};
  req.connect_timeout_s = 1;
  req.timeout_s = 2;
  http::HttpResponse roles = http.perform(req);
  if (roles.status != 200 || roles.body.empty()) {
    throw provider_error("imds", "instance has no IAM role (HTTP " + std::to_string(roles.status) + ")",
                         "attach an instance profile or use another credentials source");
  }
  std::string role = roles.body.substr(0, roles.body.find('\n'));
  req.url += role;
  http::HttpResponse r = http.perform(req);
  if (r.status != 200) {
    throw provider_error("imds", "credentials for role " + role + " failed (HTTP " + std::to_string(r.status) + ")",
                         "check the instance profile");
  }
  return credentials_from_json(r.body, "imds");
}

ChainCredentials::ChainCredentials(std::string region) : region_(std::move(region)) {}

std::optional<Credentials> ChainCredentials::resolve() {
  if (auto c = credentials_from_env()) return c;
  if (auto c = credentials_from_web_identity(http_, region_)) return c;
  if (auto c = credentials_from_container(http_)) return c;
  if (auto c = credentials_from_shared_file()) return c;
  return credentials_from_imds(http_);
}

Credentials ChainCredentials::get() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = std::time(nullptr);
  if (cached_ && (!cached_->expires_unix || *cached_->expires_unix - kRefreshMarginS > now)) return *cached_;
  for (int attempt = 1;; ++attempt) {
    std::optional<Credentials> c;
    try {
      c = resolve();
    } catch (const Error& e) {
      // A credentials service that failed (STS, the container agent, IMDS: kUnavailable) is
      // retried like an S3 call; credentials still valid for a minute ride through it.
      if (e.code() != ErrorCode::kUnavailable) throw;
      if (cached_ && cached_->expires_unix && *cached_->expires_unix > now + 60) {
        MOERL_LOG(WARN) << "s3: refreshing credentials failed (" << e.what() << "); the current ones ("
                        << cached_->source << ") stay valid for " << (*cached_->expires_unix - now) << " s";
        return *cached_;
      }
      if (attempt >= kRefreshAttempts) throw;
      const double sleep_s = 0.25 * (1 << (attempt - 1));
      MOERL_LOG(WARN) << "s3: " << e.what() << "; retrying in " << sleep_s << " s (attempt " << attempt << " of "
                      << kRefreshAttempts << ")";
      std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
      continue;
    }
    if (!c) {
      throw Error("no AWS credentials found (tried env, web identity, container, shared file, instance metadata)",
                  "set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with an IAM role (IRSA / Pod Identity)");
    }
    MOERL_LOG(DEBUG) << "s3: credentials from " << c->source << " (key id " << c->access_key_id << ")";
    cached_ = c;
    return *c;
  }
}

void ChainCredentials::invalidate() {
  std::lock_guard<std::mutex> lock(mu_);
  cached_.reset();
}

std::shared_ptr<CredentialsProvider> default_credentials_provider(const std::string& region) {
  return std::make_shared<ChainCredentials>(region);
}

}  // namespace moerl::store::s3
