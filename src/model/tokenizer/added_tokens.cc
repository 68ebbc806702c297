#include "model/tokenizer/added_tokens.h"

#include <algorithm>

#include "model/tokenizer/normalizer.h"
#include "model/tokenizer/regex.h"
#include "base/utf8.h"

namespace moerl::model::hf {

namespace {

// Unicode White_Space, what `\s` means in tokenizers' lstrip/rstrip (Rust regex).
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// `\w` of Rust's regex crate (what single_word tests): Alphabetic, marks, decimal digits,
// connector punctuation, Join_Control.
bool is_word_char(std::string_view s, size_t at) {
  static const Regex kWord(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])", "added token single_word test");
  return kWord.matches_at_start(s.substr(at));
}

// Start of the whitespace run that ends `s`.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    const size_t start = last_char_start(s.substr(0, end));
    size_t i = start;
    if (!is_white_space(next_code_point(s, i))) break;
    end = start;
  }
  return end;
}

// Length of the whitespace run that starts `s`.
size_t leading_space_length(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_white_space(next_code_point(s, j))) break;
    i = j;
  }
  return i;
}

}  // namespace

void AddedVocabulary::Trie::add(std::string_view key, int32_t token) {
  if (key.empty()) return;
  first_byte[static_cast<uint8_t>(key[0])] = true;
  int32_t node = 0;
  for (char ch : key) {
    const auto c = static_cast<uint8_t>(ch);
    auto& next = nodes[node].next;
    auto it = std::lower_bound(next.begin(), next.end(), c, [](const auto& p, uint8_t v) { return p.first < v; });
    if (it != next.end() && it->first == c) {
      node = it->second;
      continue;
    }
    const auto child = static_cast<int32_t>(nodes.size());
    next.insert(it, {c, child});
    nodes.emplace_back();
    node = child;
  }
  // NOTE: a content listed twice keeps its first token (both have the same content anyway).
  if (nodes[node].token < 0) nodes[node].token = token;
}

size_t AddedVocabulary::Trie::longest(std::string_view text, size_t at, int32_t& token) const {
  size_t best = 0;
  int32_t node = 0;
  for (size_t i = at; i < text.size(); ++i) {
    const auto c = static_cast<uint8_t>(text[i]);
    const auto& next = nodes[node].next;
    auto it = std::lower_bound(next.begin(), next.end(), c, [](const auto& p, uint8_t v) { return p.first < v; });
    if (it == next.end() || it->first != c) break;
    node = it->second;
    if (nodes[node].token >= 0) {
      best = i + 1 - at;
      token = nodes[node].token;
    }
  }
  return best;
}

AddedVocabulary AddedVocabulary::parse(const nlohmann::json& list, const JsonPlace& at, const Normalizer* normalizer) {
  AddedVocabulary v;
  if (list.is_null()) return v;
  if (!list.is_array()) bad_json(at, "expected a list of added tokens");
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonPlace t_at = at.index(i);
    const nlohmann::json& j = list[i];
    if (!j.is_object()) bad_json(t_at, "expected an object {id, content, special, ...}");
    AddedToken t;
    t.id = int_field(j, "id", t_at);
    if (t.id < 0 || t.id >= (int64_t{1} << 31)) bad_json(t_at.child("id"), "id " + std::to_string(t.id) + " is out of range");
    t.content = string_field(j, "content", t_at);
    if (t.content.empty()) bad_json(t_at.child("content"), "an added token cannot be empty");
    if (find_invalid_utf8(t.content) != std::string::npos) bad_json(t_at.child("content"), "not valid UTF-8");
    t.special = bool_field_or(j, "special", t_at, false);
    t.lstrip = bool_field_or(j, "lstrip", t_at, false);
    t.rstrip = bool_field_or(j, "rstrip", t_at, false);
    t.normalized = bool_field_or(j, "normalized", t_at, !t.special);
    t.single_word = bool_field_or(j, "single_word", t_at, false);
    if (v.index_of_id_.count(t.id)) {
      bad_json(t_at.child("id"), "id " + std::to_string(t.id) + " is used by two added tokens");
    }
    v.index_of_id_[t.id] = v.tokens_.size();
    v.id_of_.emplace(t.content, t.id);
    v.tokens_.push_back(std::move(t));
  }
  // NOTE: tokenizers lists the special tokens before the others when it builds its matchers;
  // with leftmost-longest matching the order only matters for duplicate contents.
  std::vector<size_t> order(v.tokens_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(), [&](size_t i) { return v.tokens_[i].special; });
  for (size_t i : order) {
    const AddedToken& t = v.tokens_[i];
    if (!t.normalized) {
      v.raw_.add(t.content, static_cast<int32_t>(i));
      continue;
    }
    std::string key = t.content;
    if (normalizer) normalizer->normalize(key);
    v.normalized_.add(key, static_cast<int32_t>(i));
  }
  return v;
}

void AddedVocabulary::split(std::string_view text, Matching which, std::vector<Segment>& out) const {
  const Trie& trie = which == Matching::kRaw ? raw_ : normalized_;
  size_t start_offset = 0;  // end of the last emitted segment
  size_t i = 0;
  while (i < text.size()) {
    int32_t index = -1;
    const size_t len = trie.first_byte[static_cast<uint8_t>(text[i])] ? trie.longest(text, i, index) : 0;
    if (len == 0) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + len;
    i = stop;  // matches never overlap, a rejected one included
    const AddedToken& t = tokens_[static_cast<size_t>(index)];
    if (t.single_word) {
      const bool word_before = start > 0 && is_word_char(text, last_char_start(text.substr(0, start)));
      const bool word_after = stop < text.size() && is_word_char(text, stop);
      if (word_before || word_after) continue;
    }
    if (t.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (t.rstrip) stop += leading_space_length(text.substr(stop));
    start = std::max(start, start_offset);
    if (start_offset < start) out.push_back({text.substr(start_offset, start - start_offset), -1});
    out.push_back({text.substr(start, stop - start), t.id});
    start_offset = stop;
    i = std::max(i, stop);
  }
  if (start_offset < text.size()) out.push_back({text.substr(start_offset), -1});
}

const AddedToken* AddedVocabulary::by_id(int64_t id) const {
  auto it = index_of_id_.find(id);
  return it == index_of_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int64_t> AddedVocabulary::id_of(std::string_view content) const {
  auto it = id_of_.find(std::string(content));
  if (it == id_of_.end()) return std::nullopt;
  return it->second;
}

}  // namespace moerl::model::hf
