// AWS Signature Version 4 for S3 (header signing). Pure functions: the caller supplies the
// method, the already URI-encoded path, the query parameters, the headers to sign and the
// payload hash (hex sha256 of the body, or "UNSIGNED-PAYLOAD"); sign_v4 returns the
// Authorization header and the intermediate strings (for tests and debugging; they hold no
// secret). Thread-safe.
//
//   SigningInput in{"GET", "/bucket/key", {{"list-type", "2"}}, {{"host", "h"}, {"x-amz-date", d},
//                   {"x-amz-content-sha256", kEmptySha256}}, kEmptySha256};
//   Signature s = sign_v4(in, creds, "us-east-1", "s3", d);   // s.authorization
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moerl::store::s3 {

inline constexpr const char* kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
inline constexpr const char* kUnsignedPayload = "UNSIGNED-PAYLOAD";

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;             // empty for long-term keys
  std::optional<int64_t> expires_unix;   // temporary credentials only
  std::string source;                    // "env", "web-identity", ... (never the secret)
};

using Params = std::vector<std::pair<std::string, std::string>>;

struct SigningInput {
  std::string method;
  std::string canonical_uri;  // URI-encoded path, exactly as sent on the request line
  Params query;               // decoded names and values; the signer encodes and sorts them
  Params headers;             // every header to sign, any case; must include host and x-amz-date
  std::string payload_hash;   // hex sha256 of the body or kUnsignedPayload
};

struct Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signed_headers;  // "host;range;x-amz-date"
  std::string signature;       // hex
  std::string authorization;   // full Authorization header value
};

// amz_date is "YYYYMMDDTHHMMSSZ"; the scope's date is its first 8 characters.
Signature sign_v4(const SigningInput& in, const Credentials& creds, const std::string& region,
                  const std::string& service, const std::string& amz_date);

// RFC 3986 encoding as SigV4 wants it: A-Z a-z 0-9 - . _ ~ kept, everything else %XX
// (uppercase); '/' kept unless encode_slash.
std::string uri_encode(std::string_view s, bool encode_slash);
// Sorted, encoded "a=1&b=2" (the canonical query string; also used on the request line).
std::string canonical_query(const Params& query);
// "YYYYMMDDTHHMMSSZ" for a unix time (UTC).
std::string amz_date(int64_t unix_seconds);
// "Sun, 06 Nov 1994 08:49:37 GMT" (HTTP Date, Last-Modified) -> unix seconds (0 when unparseable).
int64_t parse_http_date(const std::string& s);
// Standard base64 with padding (the encoding of S3's Content-MD5 and checksum headers).
std::string base64_encode(std::string_view raw);

}  // namespace moerl::store::s3
