#include "model/tokenizer/byte_level.h"

#include <array>

#include "base/utf8.h"

namespace moerl::model::hf {

namespace {

bool stands_for_itself(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct Tables {
  std::array<char32_t, 256> cp{};
  std::array<std::string, 256> utf8;
  std::array<int16_t, 324> byte_of{};  // code points 0..323 cover the whole alphabet

  Tables() {
    byte_of.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      cp[b] = stands_for_itself(b) ? static_cast<char32_t>(b) : next++;
      append_utf8(utf8[b], cp[b]);
      byte_of[cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_code_point(uint8_t byte) { return tables().cp[byte]; }

int code_point_to_byte(char32_t cp) { return cp < tables().byte_of.size() ? tables().byte_of[cp] : -1; }

const std::string& byte_level_char(uint8_t byte) { return tables().utf8[byte]; }

std::string to_byte_level(std::string_view raw) {
  const Tables& t = tables();
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) out += t.utf8[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> from_byte_level(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const int b = code_point_to_byte(next_code_point(s, i));
    if (b < 0) return std::nullopt;
    out.push_back(static_cast<char>(b));
  }
  return out;
}

}  // namespace moerl::model::hf
