// S3Client: one S3 REST call = build the URL (path-style or virtual-hosted), sign it with
// SigV4, perform it, and retry with full-jitter exponential backoff on 5xx, 429, SlowDown,
// RequestTimeout, expired tokens, timeouts and connection resets, within a total deadline
// per call. It does not interpret successful answers; S3Store (s3_store.h) does.
//
//   S3Client c(options, "my-bucket", default_credentials_provider(region));
//   S3Call call{"HeadObject", "HEAD", "runs/r1/latest"};
//   S3Result r = c.execute(call);      // r.status 200 or 404; retries already done
//   if (r.status != 200) c.fail(call, r);
// Thread-safe: execute() may run on many threads (curl handle pool, credentials cached).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "store/object_store.h"
#include "store/s3/credentials.h"
#include "base/http_client.h"
#include "store/s3/sigv4.h"

namespace moerl::store::s3 {

struct S3Call {
  S3Call(const char* op_name, std::string http_method, std::string object_key, Params query_params = {})
      : op(op_name), method(std::move(http_method)), key(std::move(object_key)), query(std::move(query_params)) {}

  const char* op = "";       // S3 operation name, for messages ("PutObject")
  std::string method = "GET";
  std::string key;           // full object key within the bucket; "" for bucket-level calls
  Params query;
  Params headers;            // extra headers; x-amz-*, range, if-* and content-md5 are signed
  std::string_view body;     // in-memory body: its sha256 is signed
  int body_fd = -1;          // or a streamed file range: sent as UNSIGNED-PAYLOAD
  uint64_t body_offset = 0;
  uint64_t body_length = 0;
  std::function<bool(const char*, size_t)> sink;  // streams a 2xx body; false aborts (not retried)
  std::function<void(S3Call&)> before_attempt;    // e.g. move a Range past bytes already received
  bool error_in_ok_body = false;                  // CompleteMultipartUpload: 200 may carry <Error>
};

struct S3Result {
  long status = 0;
  std::map<std::string, std::string> headers;
  std::string body;
  std::string error_code;     // parsed <Code> of an error body
  std::string error_message;
  int attempts = 0;
  bool ambiguous = false;     // an earlier attempt may have been applied by the server
  std::string header(const std::string& lower_name) const;
};

struct ResolvedEndpoint {
  std::string scheme;  // "http" | "https"
  std::string host;    // host[:port]
  bool path_style = true;
};

class S3Client {
 public:
  S3Client(const S3Options& options, std::string bucket, std::shared_ptr<CredentialsProvider> credentials);

  // Performs the call with retries. Returns the last response when its status is final
  // (2xx, or a 4xx the caller may expect such as 404/412); throws Error when retries or the
  // deadline run out, or on a transport failure the sink caused.
  S3Result execute(S3Call call);
  // Throws the Error an unexpected final response maps to (NoSuchKey/NoSuchBucket ->
  // kNotFound, AccessDenied/SignatureDoesNotMatch -> kInvalidInput with a HINT, else kIo).
  [[noreturn]] void fail(const S3Call& call, const S3Result& result) const;

  const std::string& bucket() const { return bucket_; }
  const S3Options& options() const { return options_; }
  const ResolvedEndpoint& endpoint() const { return endpoint_; }
  std::string where(const std::string& key) const { return "s3://" + bucket_ + "/" + key; }
  int64_t retries() const { return retries_.load(); }
  // Seconds added to this machine's clock when signing (0 until S3 said the clock is off).
  int64_t clock_offset_seconds() const { return clock_offset_s_.load(); }

  // Endpoint resolution (exposed for tests): options, then env, then AWS's regional endpoint.
  static ResolvedEndpoint resolve_endpoint(const S3Options& options, const std::string& bucket, const std::string& region);
  static std::string resolve_region(const S3Options& options);

 private:
  http::HttpResponse attempt(const S3Call& call, double remaining_s);
  void adopt_server_clock(const S3Result& r);

  S3Options options_;                                 // immutable
  std::string bucket_;                                // immutable
  std::string region_;                                // immutable
  ResolvedEndpoint endpoint_;                         // immutable
  std::shared_ptr<CredentialsProvider> credentials_;  // thread-safe itself
  http::HttpClient http_;
  std::atomic<int64_t> retries_{0};
  // Server time minus this machine's, learned from a RequestTimeTooSkewed answer's Date
  // header; added to the signing time of every request after it.
  std::atomic<int64_t> clock_offset_s_{0};
};

}  // namespace moerl::store::s3
