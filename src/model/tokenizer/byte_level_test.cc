// The byte-level alphabet against GPT-2's bytes_to_unicode.
#include <gtest/gtest.h>

#include <set>

#include "model/tokenizer/byte_level.h"

namespace moerl::model::hf {
namespace {

TEST(ByteLevel, AlphabetIsGpt2BytesToUnicode) {
  EXPECT_EQ(byte_to_code_point(' '), 0x120u);   // "Ġ"
  EXPECT_EQ(byte_to_code_point('\n'), 0x10Au);  // "Ċ"
  EXPECT_EQ(byte_to_code_point(0), 0x100u);
  EXPECT_EQ(byte_to_code_point(127), 0x121u);
  EXPECT_EQ(byte_to_code_point(0xAD), 0x143u);  // the last of the 68 remapped bytes
  EXPECT_EQ(byte_to_code_point('a'), static_cast<char32_t>('a'));
  EXPECT_EQ(byte_to_code_point(0xE9), 0xE9u);
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    seen.insert(byte_to_code_point(static_cast<uint8_t>(b)));
    EXPECT_EQ(code_point_to_byte(byte_to_code_point(static_cast<uint8_t>(b))), b);
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(code_point_to_byte(0x144), -1);
  EXPECT_EQ(to_byte_level("a b\n"), "a\xc4\xa0" "b\xc4\x8a");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(from_byte_level(to_byte_level(all)).value(), all);
  EXPECT_FALSE(from_byte_level("\xe4\xbd\xa0").has_value());  // 你 is not in the alphabet
}

}  // namespace
}  // namespace moerl::model::hf
