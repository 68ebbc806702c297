// Upload markers (upload_marker.h): names round-trip to their target key and nothing else
// parses as one; the body round-trips and a wrong magic, unknown version, edited field or
// missing field is refused naming the marker.
#include "store/s3/upload_marker.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/checksum.h"

namespace moerl::store::s3 {
namespace {

TEST(UploadMarker, NameSitsBesideTheTargetAndMapsBack) {
  std::string m = upload_marker_key("runs/r1/ckpt/step-1/model.bin", "upload-id-1");
  EXPECT_EQ(m.rfind("runs/r1/ckpt/step-1/.model.bin.moerl-upload-", 0), 0u) << m;
  EXPECT_EQ(m.size(), std::string("runs/r1/ckpt/step-1/.model.bin.moerl-upload-").size() + 16);
  EXPECT_EQ(upload_marker_target(m), "runs/r1/ckpt/step-1/model.bin");
  EXPECT_NE(upload_marker_key("runs/r1/ckpt/step-1/model.bin", "upload-id-2"), m) << "one marker per upload";
  EXPECT_EQ(upload_marker_target(upload_marker_key("top.bin", "x")), "top.bin");
  EXPECT_EQ(upload_marker_target(upload_marker_key("d/.hidden", "x")), "d/.hidden");

  for (const char* not_marker : {"ckpt/step-1/model.bin", "ckpt/.model.bin", "ckpt/model.bin.moerl-upload-0123456789abcdef",
                                 "ckpt/..moerl-upload-0123456789abcdef", "ckpt/.m.moerl-upload-0123456789abcdeg",
                                 "ckpt/.m.moerl-upload-0123456789abcde", "ckpt/.m.moerl-uploadX0123456789abcdef"}) {
    EXPECT_FALSE(upload_marker_target(not_marker).has_value()) << not_marker;
  }
}

TEST(UploadMarker, KeyTooLongForAMarkerIsRefusedWithAHint) {
  try {
    upload_marker_key("ckpt/" + std::string(1000, 'k'), "id");
    ADD_FAILURE() << "a marker key over 1024 bytes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("1024-byte"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("shorten the key"), std::string::npos) << e.hint();
  }
}

TEST(UploadMarker, BodyRoundTripsAndDamageIsRefused) {
  UploadMarker m{"runs/r1/ckpt/step-1/model.bin", "VXBsb2FkIElE.x_y-z", 1700000000};
  std::string text = m.to_json();
  UploadMarker back = UploadMarker::parse(text, "s3://b/marker");
  EXPECT_EQ(back.key, m.key);
  EXPECT_EQ(back.upload_id, m.upload_id);
  EXPECT_EQ(back.initiated_unix, m.initiated_unix);

  auto refused = [](const std::string& body, const std::string& expect, ErrorCode code) {
    try {
      UploadMarker::parse(body, "s3://b/marker");
      ADD_FAILURE() << "accepted: " << body;
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("s3://b/marker"), std::string::npos) << e.what();
      EXPECT_NE(e.message().find(expect), std::string::npos) << e.what();
      EXPECT_FALSE(e.hint().empty());
      EXPECT_EQ(e.code(), code) << e.what();
    }
  };
  nlohmann::json j = nlohmann::json::parse(text);
  nlohmann::json edited = j;
  edited["upload_id"] = "someone-else";
  refused(edited.dump(), "checksum mismatch", ErrorCode::kIo);
  nlohmann::json future = j;
  future["version"] = 2;
  refused(future.dump(), "version 2 is not supported", ErrorCode::kInvalidInput);
  nlohmann::json other = j;
  other["magic"] = "moerl-commit";
  refused(other.dump(), "magic", ErrorCode::kIo);
  refused("{\"key\": ", "not JSON", ErrorCode::kIo);
  nlohmann::json missing = {{"magic", kUploadMarkerMagic}, {"version", kUploadMarkerVersion}, {"key", "k"}};
  missing["checksum"] = io::sha256_hex(missing.dump());
  refused(missing.dump(), "missing or mistyped field", ErrorCode::kIo);
}

}  // namespace
}  // namespace moerl::store::s3
