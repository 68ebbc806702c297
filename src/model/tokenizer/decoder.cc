#include "model/tokenizer/decoder.h"

#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/pattern.h"
#include "base/utf8.h"

namespace moerl::model::hf {

namespace {

// Joins every token's bytes (a token with a character outside the byte-level alphabet
// contributes its UTF-8 as is), then reads the bytes as UTF-8, lossily.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      if (auto raw = from_byte_level(t)) {
        bytes += *raw;
      } else {
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = pattern_.replace_all(t, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// Runs of <0xNN> tokens become their bytes when those form UTF-8, else one U+FFFD per byte.
class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    size_t run_len = 0;
    const auto flush = [&] {
      if (run_len == 0) return;
      if (find_invalid_utf8(run) == std::string::npos) {
        out.push_back(run);
      } else {
        for (size_t k = 0; k < run_len; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear();
      run_len = 0;
    };
    for (std::string& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') byte = hex_byte(t[3], t[4]);
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
        ++run_len;
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens.swap(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int hex_byte(char hi, char lo) {
    const int h = hex_digit(hi), l = hex_digit(lo);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::vector<size_t> starts;  // byte offset of each character, plus the end
      for (size_t i = 0; i < t.size(); i += utf8_char_length(static_cast<unsigned char>(t[i]))) starts.push_back(i);
      const size_t n = starts.size();
      starts.push_back(t.size());
      const auto char_at = [&](size_t k) {
        size_t i = starts[k];
        return next_code_point(t, i);
      };
      size_t cut_start = 0;
      while (cut_start < start_ && cut_start < n && char_at(cut_start) == content_) ++cut_start;
      size_t cut_stop = n;
      for (size_t k = 0; k < stop_ && cut_stop > cut_start && char_at(cut_stop - 1) == content_; ++k) --cut_stop;
      t = t.substr(starts[cut_start], starts[cut_stop] - starts[cut_start]);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

size_t count_field(const nlohmann::json& j, const std::string& key, const JsonPlace& at) {
  const int64_t v = int_field(j, key, at);
  if (v < 0) bad_json(at.child(key), "expected a count >= 0, found " + std::to_string(v));
  return static_cast<size_t>(v);
}

}  // namespace

std::unique_ptr<Decoder> parse_decoder(const nlohmann::json& j, const JsonPlace& at) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, at);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(parse_pattern(object_field(j, "pattern", at), at.child("pattern")),
                                            string_field(j, "content", at));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const std::string content = string_field(j, "content", at);
    size_t i = 0;
    const char32_t c = content.empty() ? 0 : next_code_point(content, i);
    if (content.empty() || i != content.size()) bad_json(at.child("content"), "expected one character, found \"" + content + "\"");
    return std::make_unique<StripDecoder>(c, count_field(j, "start", at), count_field(j, "stop", at));
  }
  if (type == "Sequence") {
    return std::make_unique<SequenceDecoder>(sequence_parts<Decoder>(j, "decoders", at, parse_decoder));
  }
  unsupported_component(at, type, "ByteLevel, Replace, ByteFallback, Fuse, Strip, Sequence");
}

std::string decode_tokens(const Decoder* decoder, std::vector<std::string> tokens) {
  std::string out;
  if (decoder == nullptr) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  decoder->decode_chain(tokens);
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace moerl::model::hf
