// A Hugging Face tokenizer (tokenizer.json) behind model::Tokenizer: added tokens, then the
// normalizer, pre-tokenizer and BPE model on the text between them, as `tokenizers` encodes;
// the decoder chain for decode. docs/formats/tokenizer.md lists the supported components.
//
//   std::unique_ptr<HfTokenizer> tok = HfTokenizer::load("/models/Qwen3-30B-A3B");
//   tok->encode("<|im_start|>user\nWhat", /*add_bos=*/false);   // {151644, 872, 198, 3838}
//   tok->stop_ids();                                          // generation_config's eos list
//
// Special ids: bos/eos/pad are tokenizer_config.json's bos_token/eos_token/pad_token, else
// generation_config.json's bos_token_id/eos_token_id (its first)/pad_token_id; a tokenizer
// with no pad token pads with its EOS. stop_ids() is generation_config's eos_token_id list
// when it has one, else {eos_id()}. add_bos follows tokenizer_config.json's add_bos_token
// when it is set (prepending the BOS), else the tokenizer.json post-processor.
// Immutable after construction (the BPE word cache is internally synchronised): thread-safe.
// Unsupported components and malformed files are a moerl::Error naming the file, the JSON
// path and the type.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "model/tokenizer/added_tokens.h"
#include "model/tokenizer/bpe.h"
#include "model/tokenizer/decoder.h"
#include "model/tokenizer/normalizer.h"
#include "model/tokenizer/post_processor.h"
#include "model/tokenizer/pre_tokenizer.h"

namespace moerl::model {

class HfTokenizer final : public Tokenizer {
 public:
  static constexpr const char* kFileName = "tokenizer.json";
  // Reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json,
  // DIR/generation_config.json and DIR/chat_template.jinja.
  static std::unique_ptr<HfTokenizer> load(const std::string& dir);

  std::vector<int64_t> encode(const std::string& text, bool add_bos) const override;
  // Ids without a token are skipped, as tokenizers does (a model's padded vocabulary rows);
  // negative ids and ids >= 2^31 are an Error.
  std::string decode(const std::vector<int64_t>& ids, SpecialTokens special = SpecialTokens::kSkip) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int64_t pad_id() const override { return pad_id_; }
  int64_t bos_id() const override { return bos_id_; }
  int64_t eos_id() const override { return eos_id_; }
  std::vector<int64_t> stop_ids() const override { return stop_ids_; }
  ChatTemplateInfo chat_template() const override { return chat_; }
  // Added tokens first, then the model vocabulary (byte-level vocabularies spell a space
  // as "Ġ": token_to_id("Ġhello")).
  std::optional<int64_t> token_to_id(const std::string& token) const override;
  // Writes the files it was read from (the bytes read at load time) into `dir`.
  void save(const std::string& dir) const override;

  // The pieces the BPE model receives for `text` (no added tokens): for tests and the
  // benchmark.
  std::vector<std::string> pre_tokenize(const std::string& text) const;
  const hf::Bpe& model() const { return *bpe_; }

 private:
  HfTokenizer() = default;
  void encode_plain(std::string_view text, std::vector<int64_t>& ids) const;
  int64_t resolve(const std::optional<std::string>& token, const std::string& what, const std::string& file) const;
  bool token_to_id_known(int64_t id) const;  // some token (added or vocabulary) has this id

  std::unique_ptr<hf::Normalizer> normalizer_;
  std::unique_ptr<hf::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<hf::Bpe> bpe_;
  hf::AddedVocabulary added_;
  std::unique_ptr<hf::Decoder> decoder_;
  hf::SpecialTokensAround around_;  // what add_bos adds
  int64_t vocab_size_ = 0, bos_id_ = -1, eos_id_ = -1, pad_id_ = -1;
  std::vector<int64_t> stop_ids_;
  ChatTemplateInfo chat_;
  std::vector<bool> skip_;  // by id: dropped by decode(kSkip)
  std::vector<std::pair<std::string, std::string>> files_;  // (file name, bytes) for save()
};

}  // namespace moerl::model
