#include "model/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "base/error.h"
#include "base/utf8.h"
#include "model/tokenizer/pattern.h"

namespace moerl::model::hf {

namespace {

bool is_ascii(std::string_view s) {
  bool ascii = true;
  for (char c : s) ascii &= static_cast<unsigned char>(c) < 0x80;
  return ascii;
}

std::string utf8proc_normalize(std::string_view text, int options, const std::string& where) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0) throw Error(where + ": Unicode normalisation failed (" + utf8proc_errmsg(n) + ")", "the text must be valid UTF-8");
  std::string s(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return s;
}

// NFD, NFKC, NFKD: utf8proc's map of the whole text (ASCII is left as it is by every form).
class UnicodeNormalizer final : public Normalizer {
 public:
  UnicodeNormalizer(int options, const JsonPlace& at) : options_(options), where_(at.where()) {}
  void normalize(std::string& text) const override {
    if (!is_ascii(text)) text = utf8proc_normalize(text, options_, where_);
  }

 private:
  int options_;
  std::string where_;
};

// NFC, the form Qwen's tokenizers use, on the text as it comes (mostly NFC already): the
// text is cut before every "stable" character (combining class 0, no canonical
// decomposition, never the second character of a composition), where NFC may be applied to
// each piece alone (UAX #15); only pieces holding more than their first character go through
// utf8proc, and the rest is copied as it is.
class NfcNormalizer final : public Normalizer {
 public:
  explicit NfcNormalizer(const JsonPlace& at) : where_(at.where()) {}

  void normalize(std::string& text) const override {
    if (is_ascii(text)) return;
    std::string out;
    bool changed = false;
    size_t piece = 0;            // start of the current piece
    bool piece_needs = false;    // it holds a character that is not stable
    const auto flush = [&](size_t end) {
      const std::string_view p = std::string_view(text).substr(piece, end - piece);
      if (piece_needs) {
        const std::string n = utf8proc_normalize(p, kNfc, where_);
        if (!changed && n != p) {
          changed = true;
          out.assign(text, 0, piece);
        }
        if (changed) out += n;
      } else if (changed) {
        out += p;
      }
    };
    for (size_t i = 0; i < text.size();) {
      const size_t at = i;
      const bool stable = is_stable(next_code_point(text, i));
      if (stable && at > 0) {
        flush(at);
        piece = at;
        piece_needs = false;
      }
      piece_needs |= !stable;
    }
    flush(text.size());
    if (changed) text = std::move(out);
  }

 private:
  static constexpr int kNfc = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
  static bool is_stable(char32_t c) {
    if (c < 0x80) return true;
    if ((c >= 0x1161 && c <= 0x1175) || (c >= 0x11A8 && c <= 0x11C2)) return false;  // Hangul V/T jamo compose backwards
    const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
    const bool second_of_pair = p->comb_index != UINT16_MAX && p->comb_index >= 0x8000;
    return p->combining_class == 0 && p->decomp_seqindex == UINT16_MAX && !second_of_pair;
  }
  std::string where_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Replace final : public Normalizer {
 public:
  Replace(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override { text = pattern_.replace_all(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> parse_normalizer(const nlohmann::json& j, const JsonPlace& at) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, at);
  if (type == "NFC") return std::make_unique<NfcNormalizer>(at);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, at);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT, at);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, at);
  if (type == "Prepend") return std::make_unique<Prepend>(string_field(j, "prepend", at));
  if (type == "Replace") {
    return std::make_unique<Replace>(parse_pattern(object_field(j, "pattern", at), at.child("pattern")),
                                     string_field(j, "content", at));
  }
  if (type == "Sequence") {
    return std::make_unique<Sequence>(sequence_parts<Normalizer>(j, "normalizers", at, parse_normalizer));
  }
  unsupported_component(at, type, "NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence");
}

}  // namespace moerl::model::hf
