// SigV4: canonical request -> string to sign -> HMAC chain over date, region, service.
#include "store/s3/sigv4.h"

#include <openssl/evp.h>

#include <algorithm>
#include <ctime>
#include <iomanip>
#include <locale>
#include <sstream>

#include "base/check.h"
#include "io/checksum.h"

namespace moerl::store::s3 {

std::string uri_encode(std::string_view s, bool encode_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3);
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    bool keep = (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || u == '-' ||
                u == '.' || u == '_' || u == '~' || (u == '/' && !encode_slash);
    if (keep) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

std::string canonical_query(const Params& query) {
  std::vector<std::pair<std::string, std::string>> enc;
  enc.reserve(query.size());
  for (const auto& [k, v] : query) enc.emplace_back(uri_encode(k, true), uri_encode(v, true));
  std::sort(enc.begin(), enc.end());
  std::string out;
  for (const auto& [k, v] : enc) {
    if (!out.empty()) out.push_back('&');
    out += k;
    out.push_back('=');
    out += v;
  }
  return out;
}

static std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Trim and collapse runs of spaces, as the canonical header form requires.
static std::string canonical_value(const std::string& v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

int64_t parse_http_date(const std::string& s) {
  std::tm tm{};
  std::istringstream in(s);
  in.imbue(std::locale::classic());
  in >> std::get_time(&tm, "%a, %d %b %Y %H:%M:%S");
  if (in.fail()) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

std::string amz_date(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

Signature sign_v4(const SigningInput& in, const Credentials& creds, const std::string& region,
                  const std::string& service, const std::string& date) {
  MOERL_CHECK_EQ(date.size(), size_t{16}) << "amz_date must be YYYYMMDDTHHMMSSZ";
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& [k, v] : in.headers) headers.emplace_back(lower(k), canonical_value(v));
  std::sort(headers.begin(), headers.end());
  std::string canonical_headers, signed_headers;
  for (size_t i = 0; i < headers.size(); ++i) {
    // Repeated header names join their values with commas.
    if (i > 0 && headers[i].first == headers[i - 1].first) {
      canonical_headers.pop_back();
      canonical_headers += "," + headers[i].second + "\n";
      continue;
    }
    canonical_headers += headers[i].first + ":" + headers[i].second + "\n";
    if (!signed_headers.empty()) signed_headers.push_back(';');
    signed_headers += headers[i].first;
  }

  Signature s;
  s.signed_headers = signed_headers;
  s.canonical_request = in.method + "\n" + in.canonical_uri + "\n" + canonical_query(in.query) + "\n" +
                        canonical_headers + "\n" + signed_headers + "\n" + in.payload_hash;
  std::string day = date.substr(0, 8);
  std::string scope = day + "/" + region + "/" + service + "/aws4_request";
  s.string_to_sign = "AWS4-HMAC-SHA256\n" + date + "\n" + scope + "\n" + io::sha256_hex(s.canonical_request);
  std::string k = io::hmac_sha256_raw("AWS4" + creds.secret_access_key, day);
  k = io::hmac_sha256_raw(k, region);
  k = io::hmac_sha256_raw(k, service);
  k = io::hmac_sha256_raw(k, "aws4_request");
  s.signature = io::to_hex(io::hmac_sha256_raw(k, s.string_to_sign));
  s.authorization = "AWS4-HMAC-SHA256 Credential=" + creds.access_key_id + "/" + scope +
                    ", SignedHeaders=" + signed_headers + ", Signature=" + s.signature;
  return s;
}

std::string base64_encode(std::string_view raw) {
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace moerl::store::s3
