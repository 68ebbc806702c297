#include "model/tokenizer/bpe.h"

#include <cstdio>
#include <mutex>

#include "base/error.h"
#include "model/tokenizer/byte_level.h"
#include "base/utf8.h"

namespace moerl::model::hf {

namespace {

std::pair<std::string, std::string> parse_merge(const nlohmann::json& m, const JsonPlace& at) {
  if (m.is_string()) {
    const std::string& line = m.get_ref<const std::string&>();
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      bad_json(at, "merge \"" + line + "\" must be two tokens separated by one space");
    }
    return {line.substr(0, space), line.substr(space + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  bad_json(at, "a merge must be \"a b\" or [\"a\", \"b\"], found " + m.dump());
}

}  // namespace

std::unique_ptr<Bpe> Bpe::parse(const nlohmann::json& model, const JsonPlace& at, ByteInput input) {
  if (!model.is_object()) bad_json(at, "expected the model object");
  const std::string type = model.contains("type") ? string_field(model, "type", at) : "BPE";
  if (type != "BPE") unsupported_component(at, type, "BPE");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      (!model["dropout"].is_number() || model["dropout"].get<double>() != 0.0)) {
    bad_json(at.child("dropout"), "BPE dropout " + model["dropout"].dump() + " is not supported (moerl encodes deterministically)");
  }
  std::unique_ptr<Bpe> b(new Bpe());
  b->input_ = input;
  b->where_ = at.file;
  b->unk_token_ = string_field_or(model, "unk_token", at, "");
  b->fuse_unk_ = bool_field_or(model, "fuse_unk", at, false);
  b->byte_fallback_ = bool_field_or(model, "byte_fallback", at, false);
  b->ignore_merges_ = bool_field_or(model, "ignore_merges", at, false);
  b->prefix_ = string_field_or(model, "continuing_subword_prefix", at, "");
  b->suffix_ = string_field_or(model, "end_of_word_suffix", at, "");

  const nlohmann::json& vocab = object_field(model, "vocab", at);
  if (!vocab.is_object()) bad_json(at.child("vocab"), "expected an object {token: id}");
  b->vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() >= (int64_t{1} << 31)) {
      bad_json(at.child("vocab"), "token \"" + it.key() + "\" has id " + it->dump() + "; ids are integers in [0, 2^31)");
    }
    const auto id = static_cast<int32_t>(it->get<int64_t>());
    if (static_cast<size_t>(id) >= b->tokens_.size()) {
      b->tokens_.resize(static_cast<size_t>(id) + 1);
      b->has_token_.resize(static_cast<size_t>(id) + 1, false);
    }
    if (b->has_token_[id]) {
      bad_json(at.child("vocab"), "id " + std::to_string(id) + " is given to both \"" + b->tokens_[id] + "\" and \"" +
                                      it.key() + "\"");
    }
    b->tokens_[id] = it.key();
    b->has_token_[id] = true;
    b->vocab_.emplace(it.key(), id);
  }
  b->unk_id_ = b->unk_token_.empty() ? -1 : b->token_to_id(b->unk_token_).value_or(-1);

  const nlohmann::json& merges = object_field(model, "merges", at);
  if (!merges.is_array()) bad_json(at.child("merges"), "expected a list of merges");
  uint32_t rank = 0;
  for (size_t i = 0; i < merges.size(); ++i) {
    const JsonPlace m_at = at.child("merges").index(i);
    if (merges[i].is_string() && merges[i].get_ref<const std::string&>().rfind("#version", 0) == 0) continue;
    auto [a, c] = parse_merge(merges[i], m_at);
    const auto a_id = b->token_to_id(a), c_id = b->token_to_id(c);
    if (!a_id || !c_id) bad_json(m_at, "merge token \"" + (a_id ? c : a) + "\" is not in the vocabulary");
    if (c.size() < b->prefix_.size()) bad_json(m_at, "merge token \"" + c + "\" is shorter than continuing_subword_prefix");
    const std::string merged = a + c.substr(b->prefix_.size());
    const auto new_id = b->token_to_id(merged);
    if (!new_id) bad_json(m_at, "the merge result \"" + merged + "\" is not in the vocabulary");
    b->merges_.insert(*a_id, *c_id, rank++, *new_id);
  }

  for (int v = 0; v < 256; ++v) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", v);
    b->fallback_ids_[v] = b->token_to_id(name).value_or(-1);
    b->byte_ids_[v] = input == ByteInput::kByteLevel ? b->token_to_id(byte_level_char(static_cast<uint8_t>(v))).value_or(-1) : -1;
  }
  for (const auto& [token, id] : b->vocab_) {
    if (input == ByteInput::kText && !token.empty() && utf8_char_length(static_cast<unsigned char>(token[0])) == token.size()) {
      size_t i = 0;
      b->char_ids_.emplace(next_code_point(token, i), id);
    }
    if (input == ByteInput::kByteLevel && b->ignore_merges_) {
      if (auto raw = from_byte_level(token)) b->raw_vocab_.emplace(std::move(*raw), id);
    }
  }
  return b;
}

std::optional<int32_t> Bpe::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* Bpe::id_to_token(int64_t id) const {
  if (id < 0 || id >= id_limit() || !has_token_[static_cast<size_t>(id)]) return nullptr;
  return &tokens_[static_cast<size_t>(id)];
}

int32_t Bpe::unk_id() const {
  if (unk_id_ < 0) {
    throw Error(where_ + ": the text has a character outside the vocabulary and unk_token \"" + unk_token_ +
                    "\" is not in the vocabulary",
                "the tokenizer file is inconsistent; fetch it again");
  }
  return unk_id_;
}

// tokenizers' BPE::merge_word, symbol by symbol: vocabulary lookup (with the subword
// prefix/suffix), else byte fallback, else unk (fused when fuse_unk), else dropped.
void Bpe::symbols_slow(std::string_view word, std::vector<int32_t>& sym) const {
  sym.clear();
  int32_t pending_unk = -1;
  size_t i = 0;
  std::string s;
  while (i < word.size()) {
    const size_t start = i;
    if (input_ == ByteInput::kByteLevel) {
      s = byte_level_char(static_cast<uint8_t>(word[i]));
      ++i;
    } else {
      i += utf8_char_length(static_cast<unsigned char>(word[i]));
      s.assign(word.substr(start, i - start));
    }
    if (start > 0) s.insert(0, prefix_);
    if (i == word.size()) s += suffix_;
    if (auto id = token_to_id(s)) {
      if (pending_unk >= 0) sym.push_back(pending_unk);
      pending_unk = -1;
      sym.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : s) all &= fallback_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        // NOTE: as tokenizers, a pending unk is not flushed before the fallback bytes.
        for (char c : s) sym.push_back(fallback_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (unk_token_.empty()) continue;
    if (pending_unk >= 0 && !fuse_unk_) sym.push_back(pending_unk);
    pending_unk = unk_id();
  }
  if (pending_unk >= 0) sym.push_back(pending_unk);
}

void Bpe::initial_symbols(std::string_view word, std::vector<int32_t>& sym) const {
  sym.clear();
  if (prefix_.empty() && suffix_.empty()) {
    if (input_ == ByteInput::kByteLevel) {
      for (char c : word) {
        const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
        if (id < 0) return symbols_slow(word, sym);
        sym.push_back(id);
      }
      return;
    }
    size_t i = 0;
    while (i < word.size()) {
      auto it = char_ids_.find(next_code_point(word, i));
      if (it == char_ids_.end()) return symbols_slow(word, sym);
      sym.push_back(it->second);
    }
    return;
  }
  symbols_slow(word, sym);
}

std::vector<int32_t> Bpe::tokenize_uncached(std::string_view word,
                                            void (*merge)(std::vector<int32_t>&, const MergeTable&)) const {
  std::vector<int32_t> sym;
  initial_symbols(word, sym);
  merge(sym, merges_);
  return sym;
}

void Bpe::tokenize(std::string_view word, std::vector<int64_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const TokenIds& whole = input_ == ByteInput::kByteLevel ? raw_vocab_ : vocab_;
    if (auto it = whole.find(word); it != whole.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::shared_lock lock(cache_mu_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  thread_local std::vector<int32_t> sym;
  initial_symbols(word, sym);
  merge_word(sym, merges_);
  out.insert(out.end(), sym.begin(), sym.end());
  if (cacheable) {
    std::unique_lock lock(cache_mu_);
    if (cache_.size() < kCacheMaxEntries) cache_.emplace(std::string(word), sym);
  }
}

}  // namespace moerl::model::hf
