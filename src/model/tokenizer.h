// Tokenizers. The interface is what tasks, rollout and the CLI use. Two implementations:
// CharTokenizer, the character-level one for built-in tasks (pad 0, bos 1, eos 2, then
// printable ASCII 32..126, vocab 98), stored in a model directory as moerl_tokenizer.json;
// and HfTokenizer (model/tokenizer/hf_tokenizer.h), a Hugging Face tokenizer.json (BPE:
// Qwen2/3, DeepSeek-V3, Llama-2, Mixtral) with its tokenizer_config.json and
// generation_config.json. docs/formats/tokenizer.md describes both.
//
//   std::unique_ptr<Tokenizer> tok = load_tokenizer("ckpt/");
//   std::vector<int64_t> ids = tok->encode("1+2=", /*add_bos=*/true);
//   std::string text = tok->decode(ids);                         // special tokens dropped
//   std::string raw = tok->decode(ids, SpecialTokens::kKeep);    // as written
//   gc.eos_ids = tok->stop_ids();                                // Qwen3: {151645, 151643}
//
// Immutable after construction: thread-safe. Text a tokenizer cannot encode (outside the
// character vocabulary, invalid UTF-8) and ids it cannot decode (CharTokenizer: outside its
// vocabulary; HfTokenizer: negative, while ids that have no token are skipped as
// `tokenizers` does) are a moerl::Error.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moerl::model {

enum class SpecialTokens { kSkip, kKeep };

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // add_bos: add the special tokens the tokenizer's post-processor puts around a text (its
  // BOS: <s> for Llama-2; nothing for Qwen3); false: no special tokens added. Special tokens
  // written in the text are always recognised.
  virtual std::vector<int64_t> encode(const std::string& text, bool add_bos) const = 0;
  // decode(ids, SpecialTokens::kSkip) drops special tokens (pad/bos/eos and added tokens
  // marked special); kKeep writes them out.
  virtual std::string decode(const std::vector<int64_t>& ids, SpecialTokens special = SpecialTokens::kSkip) const = 0;
  // One past the largest token id.
  virtual int64_t vocab_size() const = 0;
  virtual int64_t pad_id() const = 0;
  virtual int64_t bos_id() const = 0;  // -1: the tokenizer has no BOS
  virtual int64_t eos_id() const = 0;  // -1: the tokenizer has no EOS
  // Every id generation stops on (generation_config eos list, else eos_id()).
  virtual std::vector<int64_t> stop_ids() const { return {eos_id()}; }
  // What chat templates read besides the messages (tokenizer_config.json); template_text is
  // empty when the tokenizer has none.
  struct ChatTemplateInfo {
    std::string template_text, bos_token, eos_token, pad_token;
  };
  virtual ChatTemplateInfo chat_template() const { return {}; }
  // Id of a token string (vocabulary or added token); nullopt when absent.
  virtual std::optional<int64_t> token_to_id(const std::string& token) const = 0;
  // Writes the tokenizer file(s) into model directory `dir`.
  virtual void save(const std::string& dir) const = 0;
};

class CharTokenizer final : public Tokenizer {
 public:
  static constexpr const char* kFileName = "moerl_tokenizer.json";
  // Default vocabulary: printable ASCII 32..126 after the three special ids.
  CharTokenizer();
  explicit CharTokenizer(std::string chars);  // ids 3.. in order; must be unique bytes

  std::vector<int64_t> encode(const std::string& text, bool add_bos) const override;
  std::string decode(const std::vector<int64_t>& ids, SpecialTokens special = SpecialTokens::kSkip) const override;
  int64_t vocab_size() const override { return 3 + static_cast<int64_t>(chars_.size()); }
  int64_t pad_id() const override { return 0; }
  int64_t bos_id() const override { return 1; }
  int64_t eos_id() const override { return 2; }
  // The special tokens' strings are "<pad>", "<s>", "</s>"; a character is its own token.
  std::optional<int64_t> token_to_id(const std::string& token) const override;
  void save(const std::string& dir) const override;
  std::string to_json() const;
  static CharTokenizer parse(const std::string& json_text, const std::string& source_name);

 private:
  std::string chars_;
  int16_t id_of_[256];  // byte -> id, -1 if absent
};

// Loads the tokenizer of a model directory: moerl_tokenizer.json (CharTokenizer) or
// tokenizer.json (HfTokenizer, with tokenizer_config.json and generation_config.json when
// present). A directory holding both uses tokenizer.json (and logs a warning); one holding
// neither is an Error (kNotFound).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir);

}  // namespace moerl::model
