// CharTokenizer and its JSON file (docs/formats/tokenizer.md), and load_tokenizer, which
// picks CharTokenizer or HfTokenizer by the files of a model directory.
#include "model/tokenizer.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/log.h"
#include "model/tokenizer/hf_tokenizer.h"

namespace moerl::model {

namespace {
constexpr const char* kFormat = "moerl.char_tokenizer";
constexpr int kVersion = 1;
constexpr const char* kSpecialNames[3] = {"<pad>", "<s>", "</s>"};  // ids 0, 1, 2

std::string printable_ascii() {
  std::string s;
  for (int c = 32; c <= 126; ++c) s.push_back(static_cast<char>(c));
  return s;
}
}  // namespace

CharTokenizer::CharTokenizer() : CharTokenizer(printable_ascii()) {}

CharTokenizer::CharTokenizer(std::string chars) : chars_(std::move(chars)) {
  std::fill(std::begin(id_of_), std::end(id_of_), static_cast<int16_t>(-1));
  for (size_t i = 0; i < chars_.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(chars_[i]);
    if (id_of_[c] != -1) {
      throw Error("char tokenizer vocabulary repeats byte " + std::to_string(c),
                  "list every character once in \"chars\"");
    }
    id_of_[c] = static_cast<int16_t>(3 + i);
  }
}

std::vector<int64_t> CharTokenizer::encode(const std::string& text, bool add_bos) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size() + 1);
  if (add_bos) ids.push_back(bos_id());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (id_of_[c] < 0) {
      throw Error("text has byte " + std::to_string(c) + " at offset " + std::to_string(i) +
                      ", which the character tokenizer does not know",
                  "the built-in tokenizer covers printable ASCII (32..126) only");
    }
    ids.push_back(id_of_[c]);
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids, SpecialTokens special) const {
  std::string out;
  for (int64_t id : ids) {
    if (id >= 0 && id < 3) {
      if (special == SpecialTokens::kKeep) out += kSpecialNames[id];
      continue;
    }
    if (id < 3 || id >= vocab_size()) {
      throw Error("token id " + std::to_string(id) + " is outside the character vocabulary [0, " +
                      std::to_string(vocab_size()) + ")",
                  "decode ids produced by a model with this tokenizer");
    }
    out.push_back(chars_[id - 3]);
  }
  return out;
}

std::optional<int64_t> CharTokenizer::token_to_id(const std::string& token) const {
  for (int64_t id = 0; id < 3; ++id) {
    if (token == kSpecialNames[id]) return id;
  }
  if (token.size() == 1 && id_of_[static_cast<unsigned char>(token[0])] >= 0) return id_of_[static_cast<unsigned char>(token[0])];
  return std::nullopt;
}

std::string CharTokenizer::to_json() const {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["pad_id"] = pad_id();
  j["bos_id"] = bos_id();
  j["eos_id"] = eos_id();
  j["chars"] = chars_;
  return j.dump(1);
}

CharTokenizer CharTokenizer::parse(const std::string& json_text, const std::string& source_name) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const std::exception& e) {
    throw Error(source_name + ": not valid JSON (" + e.what() + ")", "see docs/formats/tokenizer.md");
  }
  if (!j.is_object() || j.value("format", "") != kFormat) {
    throw Error(source_name + ": \"format\" must be \"" + kFormat + "\"", "see docs/formats/tokenizer.md");
  }
  if (j.value("version", 0) != kVersion) {
    throw Error(source_name + ": unsupported version " + j.value("version", nlohmann::json()).dump() +
                    " (this moerl reads version " + std::to_string(kVersion) + ")",
                "upgrade moerl or re-save the tokenizer");
  }
  if (j.value("pad_id", -1) != 0 || j.value("bos_id", -1) != 1 || j.value("eos_id", -1) != 2) {
    throw Error(source_name + ": a char tokenizer has pad_id 0, bos_id 1, eos_id 2", "see docs/formats/tokenizer.md");
  }
  if (!j.contains("chars") || !j["chars"].is_string()) {
    throw Error(source_name + ": missing string field \"chars\"", "see docs/formats/tokenizer.md");
  }
  return CharTokenizer(j["chars"].get<std::string>());
}

void CharTokenizer::save(const std::string& dir) const {
  std::filesystem::create_directories(dir);
  const std::string path = (std::filesystem::path(dir) / kFileName).string();
  std::ofstream f(path);
  f << to_json() << "\n";
  if (!f) throw Error("cannot write " + path, "check the directory is writable", ErrorCode::kIo);
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir) {
  const std::filesystem::path char_path = std::filesystem::path(dir) / CharTokenizer::kFileName;
  const bool has_char = std::filesystem::exists(char_path);
  if (std::filesystem::exists(std::filesystem::path(dir) / HfTokenizer::kFileName)) {
    if (has_char) {
      MOERL_LOG(WARN) << "model directory " << dir << " holds both " << HfTokenizer::kFileName << " and "
                      << CharTokenizer::kFileName << "; using " << HfTokenizer::kFileName;
    }
    return HfTokenizer::load(dir);
  }
  std::ifstream f(char_path);
  if (!f) {
    throw Error("model directory " + dir + " has no tokenizer (" + HfTokenizer::kFileName + " or " +
                    CharTokenizer::kFileName + ")",
                "copy the checkpoint's tokenizer.json (with tokenizer_config.json and generation_config.json) into it, "
                "or save one with CharTokenizer().save(dir)",
                ErrorCode::kNotFound);
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return std::make_unique<CharTokenizer>(CharTokenizer::parse(ss.str(), char_path.string()));
}

}  // namespace moerl::model
