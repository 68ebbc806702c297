#include "model/tokenizer/pre_tokenizer.h"

#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/pattern.h"

namespace moerl::model::hf {

namespace {

// tokenizers' SplitDelimiterBehavior.
enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Part {
  size_t begin, end;
  bool is_match;
};

// Cuts `text` at the matches of `pattern`, as NormalizedString::split does.
void split_piece(std::string_view text, const Pattern& pattern, Behavior behavior, bool invert,
                 std::vector<std::string_view>& out) {
  thread_local std::vector<Span> spans;
  thread_local std::vector<Part> parts, merged;
  pattern.find_all(text, spans);
  parts.clear();
  size_t prev = 0;
  for (const Span& s : spans) {
    if (prev != s.begin) parts.push_back({prev, s.begin, invert});
    parts.push_back({s.begin, s.end, !invert});
    prev = s.end;
  }
  if (prev != text.size()) parts.push_back({prev, text.size(), invert});

  merged.clear();
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated:
      merged = parts;
      break;
    case Behavior::kRemoved:
      for (const Part& p : parts) {
        if (!p.is_match) merged.push_back(p);
      }
      break;
    case Behavior::kContiguous:
      for (const Part& p : parts) {
        if (p.is_match == previous_match && !merged.empty()) {
          merged.back().end = p.end;
        } else {
          merged.push_back(p);
        }
        previous_match = p.is_match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const Part& p : parts) {
        if (p.is_match && !previous_match && !merged.empty()) {
          merged.back().end = p.end;
        } else {
          merged.push_back(p);
        }
        previous_match = p.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (size_t k = parts.size(); k-- > 0;) {
        const Part& p = parts[k];
        if (p.is_match && !previous_match && !merged.empty()) {
          merged.back().begin = p.begin;
        } else {
          merged.push_back(p);
        }
        previous_match = p.is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
  }
  for (const Part& p : merged) {
    if (p.end > p.begin) out.push_back(text.substr(p.begin, p.end - p.begin));
  }
}

class Split final : public PreTokenizer {
 public:
  Split(Pattern pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(Pieces& pieces) const override {
    std::vector<std::string_view> out;
    out.reserve(pieces.items.size() * 2);
    for (std::string_view piece : pieces.items) split_piece(piece, pattern_, behavior_, invert_, out);
    pieces.items.swap(out);
  }

 private:
  Pattern pattern_;
  Behavior behavior_;
  bool invert_;
};

// The GPT-2 pattern ByteLevel splits with when use_regex is true.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex, const JsonPlace& at) : add_prefix_space_(add_prefix_space) {
    if (use_regex) gpt2_ = std::make_unique<Pattern>(Pattern::regex(kGpt2Pattern, at.where() + " (GPT-2 split)"));
  }
  void pre_tokenize(Pieces& pieces) const override {
    if (add_prefix_space_) {
      for (std::string_view& piece : pieces.items) {
        if (piece.empty() || piece[0] != ' ') piece = pieces.keep(" " + std::string(piece));
      }
    }
    if (gpt2_) {
      std::vector<std::string_view> out;
      for (std::string_view piece : pieces.items) split_piece(piece, *gpt2_, Behavior::kIsolated, false, out);
      pieces.items.swap(out);
    }
    if (map_bytes_) {
      for (std::string_view& piece : pieces.items) piece = pieces.keep(to_byte_level(piece));
    }
  }
  void defer_mapping() { map_bytes_ = false; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Pattern> gpt2_;  // null: no split
  bool map_bytes_ = true;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(Pieces& pieces) const override {
    for (const auto& p : parts_) p->pre_tokenize(pieces);
  }
  PreTokenizer* last() const { return parts_.empty() ? nullptr : parts_.back().get(); }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

Behavior parse_behavior(const nlohmann::json& j, const JsonPlace& at) {
  const std::string b = string_field(j, "behavior", at);
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  bad_json(at.child("behavior"),
           "\"" + b + "\" is not a split behaviour (Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)");
}

}  // namespace

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const nlohmann::json& j, const JsonPlace& at) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, at);
  if (type == "Split") {
    return std::make_unique<Split>(parse_pattern(object_field(j, "pattern", at), at.child("pattern")),
                                   parse_behavior(j, at), bool_field_or(j, "invert", at, false));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevel>(bool_field_or(j, "add_prefix_space", at, true),
                                       bool_field_or(j, "use_regex", at, true), at);
  }
  if (type == "Sequence") {
    return std::make_unique<Sequence>(sequence_parts<PreTokenizer>(j, "pretokenizers", at, parse_pre_tokenizer));
  }
  unsupported_component(at, type, "Split, ByteLevel, Sequence");
}

std::unique_ptr<PreTokenizer> defer_byte_mapping(std::unique_ptr<PreTokenizer> p, bool& byte_level) {
  byte_level = false;
  PreTokenizer* last = p.get();
  if (auto* seq = dynamic_cast<Sequence*>(last)) last = seq->last();
  if (auto* bl = dynamic_cast<ByteLevel*>(last)) {
    bl->defer_mapping();
    byte_level = true;
  }
  return p;
}

}  // namespace moerl::model::hf
