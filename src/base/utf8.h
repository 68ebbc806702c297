// UTF-8 helpers: code point decoding/encoding, validation, and the lossy conversion that
// Rust's String::from_utf8_lossy and Python's decode("utf-8", "replace") apply (each maximal
// invalid subpart becomes one U+FFFD; the Hugging Face tokenizer decodes bytes this way).
//
//   size_t bad = find_invalid_utf8(text);   // npos when valid
//   std::string s = utf8_lossy(bytes);
//
// Stateless; every function is thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace moerl {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the code point at s[i] and advances i past it. Precondition: s is valid UTF-8.
char32_t next_code_point(std::string_view s, size_t& i);
// Byte length of the character whose lead byte is `lead` (valid UTF-8 assumed): 1..4.
inline size_t utf8_char_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
// Start of the last character of non-empty valid UTF-8 `s`.
size_t last_char_start(std::string_view s);
void append_utf8(std::string& out, char32_t cp);

// Byte offset of the first byte that does not begin a well-formed UTF-8 sequence (overlong
// forms, surrogates and code points above U+10FFFF are ill-formed), or npos when `s` is valid.
size_t find_invalid_utf8(std::string_view s);
// `bytes` with every maximal ill-formed subpart replaced by U+FFFD (the Unicode "substitution
// of maximal subparts" practice that Rust and Python follow).
std::string utf8_lossy(std::string_view bytes);

}  // namespace moerl
