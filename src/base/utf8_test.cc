// UTF-8 helpers. Lossy decoding is checked against what Python's
// bytes.decode("utf-8", "replace") gives (the same maximal-subpart rule as Rust's
// from_utf8_lossy, which Hugging Face tokenizers uses).
#include <gtest/gtest.h>

#include "base/utf8.h"

namespace moerl {
namespace {

std::u32string code_points(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) out.push_back(next_code_point(s, i));
  return out;
}

TEST(Utf8, LossyReplacesEachMaximalInvalidSubpartOnce) {
  const char32_t R = kReplacementChar;
  const std::vector<std::pair<std::string, std::u32string>> cases = {
      {"\xe4\xbd", {R}},                       // truncated 3-byte sequence: one U+FFFD
      {"\xe4\xbd" "A", {R, U'A'}},
      {"\xed\xa0\x80", {R, R, R}},             // a surrogate is not a prefix of anything valid
      {"\xf0\x9f\x98", {R}},
      {"\xc0\xaf", {R, R}},                    // overlong
      {"\xf5x", {R, U'x'}},
      {"\xf0\x9f\x98\x80", {0x1F600}},
      {"a\x80\x80" "b", {U'a', R, R, U'b'}},
      {"\xe0\x80\x80", {R, R, R}},
      {"\xf4\x90\x80\x80", {R, R, R, R}},     // above U+10FFFF
      {"\xef\xbf\xbd", {R}},
      {"\xc3", {R}},
  };
  for (const auto& [bytes, want] : cases) {
    EXPECT_EQ(code_points(utf8_lossy(bytes)), want) << "bytes of length " << bytes.size();
    const bool valid = bytes == "\xf0\x9f\x98\x80" || bytes == "\xef\xbf\xbd";
    EXPECT_EQ(find_invalid_utf8(bytes) == std::string::npos, valid) << "bytes of length " << bytes.size();
  }
  EXPECT_EQ(find_invalid_utf8("ok \xe4\xbd"), 3u);
  EXPECT_EQ(find_invalid_utf8("h\xc3\xa9llo \xf0\x9f\x98\x80"), std::string::npos);
}

TEST(Utf8, EncodeDecodeEveryPlane) {
  for (char32_t cp : {U'A', char32_t{0x7FF}, char32_t{0x800}, char32_t{0xFFFD}, char32_t{0x10000}, char32_t{0x10FFFF}}) {
    std::string s;
    append_utf8(s, cp);
    size_t i = 0;
    EXPECT_EQ(next_code_point(s, i), cp);
    EXPECT_EQ(i, s.size());
    EXPECT_EQ(utf8_char_length(static_cast<unsigned char>(s[0])), s.size());
    EXPECT_EQ(find_invalid_utf8(s), std::string::npos);
  }
}

}  // namespace
}  // namespace moerl
