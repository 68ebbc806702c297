// SigV4 against AWS's published S3 examples (the "Signature Calculations for the
// Authorization Header" page): the four signatures must match exactly.
#include "store/s3/sigv4.h"

#include <gtest/gtest.h>

#include "io/checksum.h"

namespace moerl::store::s3 {
namespace {

const Credentials kCreds{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "", {}, "test"};
const char* kDate = "20130524T000000Z";
const char* kHost = "examplebucket.s3.amazonaws.com";

TEST(SigV4, GetObjectWithRange) {
  SigningInput in{"GET", "/test.txt", {},
                  {{"Host", kHost}, {"Range", "bytes=0-9"}, {"x-amz-content-sha256", kEmptySha256},
                   {"x-amz-date", kDate}},
                  kEmptySha256};
  Signature s = sign_v4(in, kCreds, "us-east-1", "s3", kDate);
  EXPECT_EQ(s.signed_headers, "host;range;x-amz-content-sha256;x-amz-date");
  EXPECT_EQ(s.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4, PutObjectWithPayloadHash) {
  std::string body = "Welcome to Amazon S3.";
  std::string path = uri_encode("/test$file.text", false);
  EXPECT_EQ(path, "/test%24file.text");
  SigningInput in{"PUT", path, {},
                  {{"Host", kHost}, {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                   {"x-amz-content-sha256", io::sha256_hex(body)}, {"x-amz-date", kDate},
                   {"x-amz-storage-class", "REDUCED_REDUNDANCY"}},
                  io::sha256_hex(body)};
  Signature s = sign_v4(in, kCreds, "us-east-1", "s3", kDate);
  EXPECT_EQ(s.signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(SigV4, GetBucketLifecycle) {
  SigningInput in{"GET", "/", {{"lifecycle", ""}},
                  {{"Host", kHost}, {"x-amz-content-sha256", kEmptySha256}, {"x-amz-date", kDate}},
                  kEmptySha256};
  Signature s = sign_v4(in, kCreds, "us-east-1", "s3", kDate);
  EXPECT_NE(s.canonical_request.find("\nlifecycle=\n"), std::string::npos);
  EXPECT_EQ(s.signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(SigV4, ListObjects) {
  // Query given out of order: the signer sorts it.
  SigningInput in{"GET", "/", {{"prefix", "J"}, {"max-keys", "2"}},
                  {{"x-amz-date", kDate}, {"x-amz-content-sha256", kEmptySha256}, {"Host", kHost}},
                  kEmptySha256};
  Signature s = sign_v4(in, kCreds, "us-east-1", "s3", kDate);
  EXPECT_EQ(s.signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4, SessionTokenAndWhitespaceChangeTheSignature) {
  SigningInput in{"GET", "/k", {}, {{"host", kHost}, {"x-amz-date", kDate}}, kUnsignedPayload};
  Signature a = sign_v4(in, kCreds, "us-east-1", "s3", kDate);
  in.headers.push_back({"x-amz-security-token", "  tok   en "});
  Signature b = sign_v4(in, kCreds, "us-east-1", "s3", kDate);
  EXPECT_NE(a.signature, b.signature);
  EXPECT_NE(b.canonical_request.find("x-amz-security-token:tok en\n"), std::string::npos);
  EXPECT_NE(b.canonical_request.find("\nUNSIGNED-PAYLOAD"), std::string::npos);
}

TEST(SigV4, UriEncoding) {
  EXPECT_EQ(uri_encode("a b/c+d~e", false), "a%20b/c%2Bd~e");
  EXPECT_EQ(uri_encode("a/b", true), "a%2Fb");
  EXPECT_EQ(uri_encode("\xc3\xa9", true), "%C3%A9");
  EXPECT_EQ(canonical_query({{"b", "x y"}, {"a", "1"}}), "a=1&b=x%20y");
  EXPECT_EQ(amz_date(1369353600), "20130524T000000Z");
}

TEST(Digest, KnownValues) {
  EXPECT_EQ(io::sha256_hex(""), kEmptySha256);
  EXPECT_EQ(io::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(base64_encode("hello"), "aGVsbG8=");
}

}  // namespace
}  // namespace moerl::store::s3
