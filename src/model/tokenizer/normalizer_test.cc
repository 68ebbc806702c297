// Normalizers. NFC cuts the text before stable characters and normalises only the pieces
// that need it: checked against utf8proc's NFC of the whole text on random mixtures of
// ASCII, combining marks, precomposed and decomposable letters, Hangul jamo and syllables,
// CJK compatibility ideographs and singletons.
#include <gtest/gtest.h>

#include <utf8proc.h>

#include <cstdlib>
#include <random>

#include "base/utf8.h"
#include "model/tokenizer/normalizer.h"

namespace moerl::model::hf {
namespace {

std::string whole_nfc(const std::string& s) {
  utf8proc_uint8_t* out = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str()));
  std::string r(reinterpret_cast<const char*>(out));
  std::free(out);
  return r;
}

std::string normalize(const nlohmann::json& j, std::string s) {
  parse_normalizer(j, {"test.json", "normalizer"})->normalize(s);
  return s;
}

TEST(Normalizer, NfcComposesAndReorders) {
  const nlohmann::json nfc = {{"type", "NFC"}};
  EXPECT_EQ(normalize(nfc, "Cafe\u0301"), "Caf\u00e9");
  EXPECT_EQ(normalize(nfc, "\u212b"), "\u00c5");                // Angstrom sign, first character of the text
  EXPECT_EQ(normalize(nfc, "a\u0323\u0302"), "\u1ead");         // ạ + ̂ -> ậ
  EXPECT_EQ(normalize(nfc, "a\u0302\u0323"), "\u1ead");         // marks reordered by combining class first
  EXPECT_EQ(normalize(nfc, "\u1100\u1161\u11a8"), "\uac01");    // Hangul L V T -> 각
  EXPECT_EQ(normalize(nfc, "\uac00\u11a8"), "\uac01");          // LV syllable + T
  EXPECT_EQ(normalize(nfc, "\uf900"), "\u8c48");                // CJK compatibility ideograph
  EXPECT_EQ(normalize(nfc, "already NFC: é 数学"), "already NFC: é 数学");
  EXPECT_EQ(normalize({{"type", "NFD"}}, "\u00e9"), "e\u0301");
  EXPECT_EQ(normalize({{"type", "NFKC"}}, "\ufb01 \uff46"), "fi f");
  EXPECT_EQ(normalize({{"type", "NFKD"}}, "\u00e9\ufb01"), "e\u0301fi");
}

TEST(Normalizer, NfcPiecewiseEqualsWholeTextNfc) {
  const std::vector<char32_t> pool = {
      'a', 'e', 'o', 'A', ' ', '\n', '1', 0x0301, 0x0300, 0x0302, 0x0323, 0x0308, 0x0327, 0x00e9, 0x00c5, 0x212b,
      0x2126, 0x1e9b, 0x0344, 0x0f73, 0x1100, 0x1161, 0x11a8, 0xac00, 0xac01, 0xf900, 0x2f800, 0x6570, 0x0915,
      0x093c, 0x0958, 0x05b8, 0x05b7, 0x0345, 0x03b1, 0x1f00, 0x0cc6, 0x0cd5, 0x0cc2, 0x09c7, 0x09be, 0x0b47,
      0x0b3e, 0x1b05, 0x1b35, 0xfb1d, 0x1d15e, 0x1f600, 0x200d,
  };
  const nlohmann::json nfc = {{"type", "NFC"}};
  std::mt19937 rng(11);
  for (int t = 0; t < 3000; ++t) {
    std::string s;
    const size_t n = 1 + rng() % 12;
    for (size_t k = 0; k < n; ++k) append_utf8(s, pool[rng() % pool.size()]);
    ASSERT_EQ(normalize(nfc, s), whole_nfc(s)) << "case " << t;
  }
}

}  // namespace
}  // namespace moerl::model::hf
