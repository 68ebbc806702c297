// S3Client: URL building, SigV4 signing, and the retry loop shared by every S3 call.
#include "store/s3/s3_client.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <random>
#include <thread>

#include "base/deadline.h"
#include "base/env.h"
#include "base/error.h"
#include "base/log.h"
#include "io/checksum.h"
#include "store/s3/xml.h"

namespace moerl::store::s3 {

std::string S3Result::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

std::string S3Client::resolve_region(const S3Options& o) {
  if (!o.region.empty()) return o.region;
  return env::get_or("AWS_REGION", env::get_or("AWS_DEFAULT_REGION", "us-east-1"));
}

static bool dns_compatible(const std::string& bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char c : bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

ResolvedEndpoint S3Client::resolve_endpoint(const S3Options& o, const std::string& bucket, const std::string& region) {
  std::string url = o.endpoint;
  if (url.empty()) url = env::get_or("AWS_ENDPOINT_URL_S3", env::get_or("AWS_ENDPOINT_URL", ""));
  bool custom = !url.empty();
  if (!custom) url = "https://s3." + region + ".amazonaws.com";
  ResolvedEndpoint e;
  size_t sep = url.find("://");
  if (sep == std::string::npos || (url.substr(0, sep) != "http" && url.substr(0, sep) != "https")) {
    throw Error("S3 endpoint '" + url + "' is not an http(s) URL",
                "write the endpoint as http://host:port or https://host (AWS_ENDPOINT_URL_S3 or [store].endpoint)");
  }
  e.scheme = url.substr(0, sep);
  e.host = url.substr(sep + 3);
  while (!e.host.empty() && e.host.back() == '/') e.host.pop_back();
  if (e.host.empty() || e.host.find('/') != std::string::npos) {
    throw Error("S3 endpoint '" + url + "' must be scheme://host[:port] without a path",
                "e.g. http://127.0.0.1:9000");
  }
  switch (o.addressing) {
    case Addressing::kPath: e.path_style = true; break;
    case Addressing::kVirtual: e.path_style = false; break;
    case Addressing::kAuto: e.path_style = custom || !dns_compatible(bucket); break;
  }
  if (!e.path_style && !dns_compatible(bucket)) {
    throw Error("bucket '" + bucket + "' cannot be addressed virtual-hosted style (not a DNS label)",
                "use addressing = \"path\"");
  }
  return e;
}

S3Client::S3Client(const S3Options& options, std::string bucket, std::shared_ptr<CredentialsProvider> credentials)
    : options_(options),
      bucket_(std::move(bucket)),
      region_(resolve_region(options)),
      endpoint_(resolve_endpoint(options, bucket_, region_)),
      credentials_(std::move(credentials)) {}

static bool signed_header(const std::string& name) {
  std::string n;
  for (char c : name) n.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return n.rfind("x-amz-", 0) == 0 || n == "range" || n.rfind("if-", 0) == 0 || n == "content-md5" ||
         n == "content-type";
}

http::HttpResponse S3Client::attempt(const S3Call& call, double remaining_s) {
  Credentials creds = credentials_->get();
  std::string host = endpoint_.path_style ? endpoint_.host : bucket_ + "." + endpoint_.host;
  std::string path = endpoint_.path_style ? "/" + bucket_ : "";
  if (!call.key.empty()) {
    path += "/" + uri_encode(call.key, false);
  } else if (!endpoint_.path_style) {
    path = "/";
  }
  std::string query = canonical_query(call.query);
  bool streamed = call.body_fd >= 0;
  std::string payload_hash = streamed ? kUnsignedPayload : io::sha256_hex(call.body);
  std::string date = amz_date(std::time(nullptr) + clock_offset_s_.load());

  Params to_sign = {{"host", host}, {"x-amz-date", date}, {"x-amz-content-sha256", payload_hash}};
  if (!creds.session_token.empty()) to_sign.push_back({"x-amz-security-token", creds.session_token});
  http::HttpRequest req;
  for (const auto& [k, v] : call.headers) {
    if (signed_header(k)) {
      to_sign.push_back({k, v});
    } else {
      req.headers.push_back({k, v});
    }
  }
  Signature sig = sign_v4({call.method, path, call.query, to_sign, payload_hash}, creds, region_, "s3", date);
  for (const auto& h : to_sign) req.headers.push_back(h);
  req.headers.push_back({"Authorization", sig.authorization});

  req.method = call.method;
  req.url = endpoint_.scheme + "://" + host + path + (query.empty() ? "" : "?" + query);
  req.connect_timeout_s = options_.connect_timeout_s;
  req.stall_timeout_s = options_.stall_timeout_s;
  req.timeout_s = std::max(1.0, remaining_s);
  req.sink = call.sink;
  if (streamed) {
    uint64_t pos = 0;
    int fd = call.body_fd;
    uint64_t off = call.body_offset, len = call.body_length;
    req.reader_size = len;
    req.reader = [fd, off, len, pos](char* buf, size_t max) mutable -> size_t {
      size_t want = static_cast<size_t>(std::min<uint64_t>(max, len - pos));
      if (want == 0) return 0;
      ssize_t n = ::pread(fd, buf, want, static_cast<off_t>(off + pos));
      if (n <= 0) throw Error("reading the upload source failed", "", ErrorCode::kIo);
      pos += static_cast<uint64_t>(n);
      return static_cast<size_t>(n);
    };
  } else {
    req.body = call.body;
  }
  return http_.perform(req);
}

static void parse_error_body(S3Result& r) {
  if (r.body.find("<Error") == std::string::npos) return;
  try {
    XmlNode e = parse_xml(r.body, "S3 error");
    const XmlNode* err = e.find("Error");
    if (err) {
      r.error_code = err->text_of("Code");
      r.error_message = err->text_of("Message");
    }
  } catch (const Error&) {
  }
}

enum class Verdict { kFinal, kRetry, kRetryWithNewCredentials, kRetryWithServerClock };

static Verdict classify(const S3Result& r) {
  if (r.status == 0) return Verdict::kRetry;
  const std::string& c = r.error_code;
  if (c == "ExpiredToken" || c == "TokenRefreshRequired" || c == "ExpiredTokenException") {
    return Verdict::kRetryWithNewCredentials;
  }
  if (c == "RequestTimeTooSkewed") return Verdict::kRetryWithServerClock;
  if (r.status >= 500 || r.status == 429) return Verdict::kRetry;
  if (c == "SlowDown" || c == "RequestTimeout" || c == "InternalError" || c == "OperationAborted" ||
      c == "ConditionalRequestConflict" || c == "ServiceUnavailable") {
    return Verdict::kRetry;
  }
  return Verdict::kFinal;
}

S3Result S3Client::execute(S3Call call) {
  Deadline deadline = Deadline::after_seconds(options_.request_deadline_s);
  thread_local std::mt19937_64 rng{std::random_device{}()};
  S3Result r;
  std::string last_problem;
  for (int attempt_no = 1;; ++attempt_no) {
    if (call.before_attempt) call.before_attempt(call);
    http::HttpResponse h = attempt(call, deadline.remaining_seconds());
    r = S3Result{};
    r.status = h.status;
    r.headers = std::move(h.headers);
    r.body = std::move(h.body);
    r.attempts = attempt_no;
    r.ambiguous = !last_problem.empty();
    if (h.sink_aborted) {
      throw Error(std::string(call.op) + " " + where(call.key) + ": writing the downloaded data failed",
                  "check free disk space at the destination", ErrorCode::kIo);
    }
    bool ok = r.status >= 200 && r.status < 300;
    if (!ok || (call.error_in_ok_body && r.status == 200)) parse_error_body(r);
    if (ok && r.error_code.empty()) return r;
    // Non-2xx, or a 200 whose body is an <Error> (CompleteMultipartUpload).
    if (classify(r) == Verdict::kFinal) return r;
    Verdict v = classify(r);
    last_problem = r.status == 0 ? h.transport_error
                                 : "HTTP " + std::to_string(r.status) + (r.error_code.empty() ? "" : " " + r.error_code) +
                                       (r.error_message.empty() ? "" : " (" + r.error_message + ")");
    if (v == Verdict::kRetryWithNewCredentials) credentials_->invalidate();
    if (v == Verdict::kRetryWithServerClock) adopt_server_clock(r);
    if (attempt_no >= options_.max_attempts) {
      throw Error(std::string(call.op) + " " + where(call.key) + " failed after " + std::to_string(attempt_no) +
                      " attempts; last: " + last_problem,
                  "the S3 endpoint " + endpoint_.scheme + "://" + endpoint_.host +
                      " keeps failing; check it is reachable, or raise [store].max_attempts",
                  r.status == 0 ? ErrorCode::kUnavailable : ErrorCode::kIo);
    }
    double cap = std::min(options_.max_backoff_s, options_.base_backoff_s * std::pow(2.0, attempt_no - 1));
    double sleep_s = std::uniform_real_distribution<double>(0, cap)(rng);
    if (deadline.remaining_seconds() <= sleep_s + 0.05) {
      throw Error(std::string(call.op) + " " + where(call.key) + " did not succeed within " +
                      std::to_string(static_cast<int>(options_.request_deadline_s)) + " s (" +
                      std::to_string(attempt_no) + " attempts; last: " + last_problem + ")",
                  "the S3 endpoint is slow or failing; raise [store].request_deadline_s if transfers are just large",
                  ErrorCode::kTimeout);
    }
    ++retries_;
    MOERL_LOG(DEBUG) << "s3: " << call.op << " " << where(call.key) << (call.query.empty() ? "" : "?" + canonical_query(call.query)) << " attempt " << attempt_no << " failed ("
                     << last_problem << "); retrying in " << static_cast<int>(sleep_s * 1000) << " ms";
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
  }
}

void S3Client::adopt_server_clock(const S3Result& r) {
  const int64_t server = parse_http_date(r.header("date"));
  if (server == 0) return;  // no usable Date: the retry signs with the same clock (and fails clearly)
  const int64_t offset = server - static_cast<int64_t>(std::time(nullptr));
  if (clock_offset_s_.exchange(offset) != offset) {
    MOERL_LOG(WARN) << "s3: " << endpoint_.scheme << "://" << endpoint_.host << " says this machine's clock is "
                    << offset << " s off its own (RequestTimeTooSkewed); signing with the server's time from now on "
                    << "(HINT: run an NTP client, e.g. chrony, on this machine)";
  }
}

void S3Client::fail(const S3Call& call, const S3Result& r) const {
  std::string what = std::string(call.op) + " " + where(call.key) + ": HTTP " + std::to_string(r.status) +
                     (r.error_code.empty() ? "" : " " + r.error_code) +
                     (r.error_message.empty() ? "" : " (" + r.error_message + ")");
  const std::string& c = r.error_code;
  if (c == "NoSuchBucket") {
    throw Error(what, "create the bucket, or fix the bucket name in the store URI", ErrorCode::kNotFound);
  }
  if (r.status == 404 || c == "NoSuchKey" || c == "NoSuchUpload") {
    throw Error(what, "list the prefix with `moerl store ls`", ErrorCode::kNotFound);
  }
  if (c == "SignatureDoesNotMatch" || c == "InvalidAccessKeyId" || c == "AccessDenied" || r.status == 403) {
    throw Error(what, "check the AWS credentials (source: " + credentials_->get().source +
                          ") and the region; for a local server, its access key and secret",
                ErrorCode::kInvalidInput);
  }
  if (c == "AuthorizationHeaderMalformed" || c == "PermanentRedirect" || r.status == 301) {
    throw Error(what, "the bucket is in another region: set AWS_REGION or [store].region", ErrorCode::kInvalidInput);
  }
  throw Error(what, "see the S3 error code above", ErrorCode::kIo);
}

}  // namespace moerl::store::s3
