// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): vocabulary, merges (a
// list of "a b" strings or of [a, b] pairs), unk_token with fuse_unk, byte_fallback
// (<0xNN> pieces for characters outside the vocabulary), continuing_subword_prefix,
// end_of_word_suffix, ignore_merges. A cache keeps the ids of recently seen words.
//
//   Bpe bpe = Bpe::parse(j["model"], {path, "model"}, ByteInput::kByteLevel);
//   std::vector<int64_t> ids;
//   bpe.tokenize("hello", ids);              // appends the word's ids
//
// With ByteInput::kByteLevel the words are raw bytes and the model reads each byte as its
// byte-level character (byte_level.h): the same ids as tokenizing the mapped string, without
// building it. Thread-safety: tokenize() may run on many threads (the cache is guarded by a
// shared mutex); everything else is immutable after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/tokenizer/bpe_merge.h"
#include "model/tokenizer/json_util.h"

namespace moerl::model::hf {

enum class ByteInput { kText, kByteLevel };

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class Bpe {
 public:
  static std::unique_ptr<Bpe> parse(const nlohmann::json& model, const JsonPlace& at, ByteInput input);

  // Appends the ids of one pre-tokenized word (valid UTF-8 for kText, any bytes for
  // kByteLevel). A character that has no token, no byte fallback and no unk is dropped, as
  // tokenizers does.
  void tokenize(std::string_view word, std::vector<int64_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The vocabulary string of `id` (byte-level form for byte-level vocabularies), or null.
  const std::string* id_to_token(int64_t id) const;
  // One past the largest id.
  int64_t id_limit() const { return static_cast<int64_t>(tokens_.size()); }
  size_t num_merges() const { return merges_.size(); }

  // The word's ids without the cache, by `merge` (merge_word or merge_word_naive): for the
  // tests and the benchmark.
  std::vector<int32_t> tokenize_uncached(std::string_view word,
                                         void (*merge)(std::vector<int32_t>&, const MergeTable&)) const;

 private:
  Bpe() = default;
  void initial_symbols(std::string_view word, std::vector<int32_t>& sym) const;
  void symbols_slow(std::string_view word, std::vector<int32_t>& sym) const;
  int32_t unk_id() const;

  TokenIds vocab_;
  std::vector<std::string> tokens_;  // id -> token; "" where no token has the id
  std::vector<bool> has_token_;
  MergeTable merges_;
  ByteInput input_ = ByteInput::kText;
  std::string unk_token_;  // "" = none
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix
  std::string where_;
  // Fast paths for initial symbols (only when prefix_ and suffix_ are empty):
  int32_t byte_ids_[256];                            // kByteLevel: byte -> id of its character, -1
  std::unordered_map<char32_t, int32_t> char_ids_;  // kText: one-character tokens
  TokenIds raw_vocab_;                               // kByteLevel + ignore_merges: raw bytes -> id
  int32_t fallback_ids_[256];                        // <0xNN> -> id, -1

  // Cache of words already merged, bounded (no insertion once full).
  static constexpr size_t kCacheMaxEntries = 1 << 17;
  static constexpr size_t kCacheMaxWordBytes = 256;
  mutable std::shared_mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;  // guarded by cache_mu_
};

}  // namespace moerl::model::hf
