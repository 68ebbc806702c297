// The byte-level alphabet of GPT-2-style BPE (Qwen2/3, DeepSeek-V3, Llama-3): every byte is
// written as one printable code point, so that a vocabulary of strings covers all bytes.
// Printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves;
// the other 68 bytes map to U+0100, U+0101, ... in byte order (tokenizers' bytes_char()).
//
//   std::string mapped = to_byte_level("é");      // "Ã©"
//   std::optional<std::string> raw = from_byte_level(mapped);   // "é"
//
// Tables are built once; every function is thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace moerl::model::hf {

char32_t byte_to_code_point(uint8_t byte);
// The byte a code point of the alphabet stands for, or -1 for a code point outside it.
int code_point_to_byte(char32_t cp);
// UTF-8 of the code point that stands for `byte`.
const std::string& byte_level_char(uint8_t byte);

std::string to_byte_level(std::string_view raw);
// The bytes a byte-level string stands for; nullopt when a character is outside the
// alphabet. Precondition: `s` is valid UTF-8.
std::optional<std::string> from_byte_level(std::string_view s);

}  // namespace moerl::model::hf
