// Tokenizers. The interface is what tasks, rollout and the CLI use; CharTokenizer is the
// character-level one for built-in tasks (pad 0, bos 1, eos 2, then printable ASCII 32..126,
// vocab 98). It lives in a model directory as moerl_tokenizer.json
// (docs/formats/tokenizer.md); a Hugging Face tokenizer.json (BPE) loader will plug in
// behind the same interface.
//
//   std::unique_ptr<Tokenizer> tok = load_tokenizer("ckpt/");
//   std::vector<int64_t> ids = tok->encode("1+2=", /*add_bos=*/true);
//   std::string text = tok->decode(ids);   // special tokens dropped
//
// Immutable after construction: thread-safe. Text outside the vocabulary is a moerl::Error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moerl::model {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int64_t> encode(const std::string& text, bool add_bos) const = 0;
  // Special tokens (pad/bos/eos) are skipped; an id outside the vocabulary is an Error.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t pad_id() const = 0;
  virtual int64_t bos_id() const = 0;
  virtual int64_t eos_id() const = 0;
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
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return 3 + static_cast<int64_t>(chars_.size()); }
  int64_t pad_id() const override { return 0; }
  int64_t bos_id() const override { return 1; }
  int64_t eos_id() const override { return 2; }
  void save(const std::string& dir) const override;
  std::string to_json() const;
  static CharTokenizer parse(const std::string& json_text, const std::string& source_name);

 private:
  std::string chars_;
  int16_t id_of_[256];  // byte -> id, -1 if absent
};

// Loads the tokenizer of a model directory: moerl_tokenizer.json. Error (kNotFound) when the
// directory has none.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir);

}  // namespace moerl::model
