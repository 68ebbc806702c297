#include "model/tokenizer/hf_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/files.h"
#include "model/tokenizer/json_util.h"
#include "model/tokenizer/tokenizer_config.h"
#include "base/utf8.h"

namespace moerl::model {

namespace {

namespace fs = std::filesystem;

// The companion files save() carries along when they exist.
constexpr const char* kCompanionFiles[] = {"tokenizer_config.json", "generation_config.json", "chat_template.jinja"};

std::string read_bytes(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read " + path.string(), "check the file's permissions", ErrorCode::kIo);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

int64_t HfTokenizer::resolve(const std::optional<std::string>& token, const std::string& what,
                             const std::string& file) const {
  if (!token) return -1;
  if (auto id = token_to_id(*token)) return *id;
  throw Error(file + ": " + what + " \"" + *token + "\" is not a token of " + kFileName,
              "the tokenizer files come from different models; use the files of one checkpoint");
}

std::unique_ptr<HfTokenizer> HfTokenizer::load(const std::string& dir) {
  const fs::path path = fs::path(dir) / kFileName;
  if (!fs::exists(path)) {
    throw Error("model directory " + dir + " has no " + kFileName, "copy the tokenizer files of the checkpoint into it",
                ErrorCode::kNotFound);
  }
  std::unique_ptr<HfTokenizer> t(new HfTokenizer());
  t->files_.emplace_back(kFileName, read_bytes(path));
  for (const char* name : kCompanionFiles) {
    if (fs::exists(fs::path(dir) / name)) t->files_.emplace_back(name, read_bytes(fs::path(dir) / name));
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(t->files_[0].second);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(path.string() + ": not valid JSON (" + e.what() + ")", "the file is damaged or truncated; fetch it again");
  }
  const hf::JsonPlace root{path.string(), ""};
  if (!j.is_object()) hf::bad_json(root, "expected a JSON object");
  const auto part = [&](const char* key) -> const nlohmann::json& {
    static const nlohmann::json kNull;
    auto it = j.find(key);
    return it == j.end() ? kNull : *it;
  };
  t->normalizer_ = hf::parse_normalizer(part("normalizer"), root.child("normalizer"));
  bool byte_level = false;
  t->pre_tokenizer_ = hf::defer_byte_mapping(hf::parse_pre_tokenizer(part("pre_tokenizer"), root.child("pre_tokenizer")), byte_level);
  t->bpe_ = hf::Bpe::parse(hf::object_field(j, "model", root), root.child("model"),
                           byte_level ? hf::ByteInput::kByteLevel : hf::ByteInput::kText);
  t->added_ = hf::AddedVocabulary::parse(part("added_tokens"), root.child("added_tokens"), t->normalizer_.get());
  t->decoder_ = hf::parse_decoder(part("decoder"), root.child("decoder"));
  t->around_ = hf::parse_post_processor(part("post_processor"), root.child("post_processor"));

  t->vocab_size_ = t->bpe_->id_limit();
  for (const hf::AddedToken& a : t->added_.tokens()) t->vocab_size_ = std::max(t->vocab_size_, a.id + 1);

  const hf::TokenizerConfig c = hf::read_tokenizer_config(dir);
  const std::string tc = (fs::path(dir) / "tokenizer_config.json").string();
  const std::string gc = (fs::path(dir) / "generation_config.json").string();
  const auto check_id = [&](int64_t id, const std::string& what) {
    if (id >= 0 && !t->token_to_id_known(id)) {
      throw Error(gc + ": " + what + " " + std::to_string(id) + " is not a token of " + kFileName,
                  "the tokenizer files come from different models; use the files of one checkpoint");
    }
    return id;
  };
  t->bos_id_ = t->resolve(c.bos_token, "bos_token", tc);
  if (t->bos_id_ < 0 && c.generation_bos_id) t->bos_id_ = check_id(*c.generation_bos_id, "bos_token_id");
  t->eos_id_ = t->resolve(c.eos_token, "eos_token", tc);
  for (int64_t id : c.generation_eos_ids) check_id(id, "eos_token_id");
  if (t->eos_id_ < 0 && !c.generation_eos_ids.empty()) t->eos_id_ = c.generation_eos_ids[0];
  t->pad_id_ = t->resolve(c.pad_token, "pad_token", tc);
  if (t->pad_id_ < 0 && c.generation_pad_id) t->pad_id_ = check_id(*c.generation_pad_id, "pad_token_id");
  if (t->pad_id_ < 0) t->pad_id_ = t->eos_id_;
  t->stop_ids_ = c.generation_eos_ids;
  if (t->stop_ids_.empty() && t->eos_id_ >= 0) t->stop_ids_ = {t->eos_id_};

  if (c.add_bos_token || c.add_eos_token) {  // as transformers, these replace the post-processor
    t->around_ = {};
    if (c.add_bos_token.value_or(false)) {
      if (t->bos_id_ < 0) throw Error(tc + ": add_bos_token is true but there is no bos_token", "set bos_token or add_bos_token false");
      t->around_.before = {t->bos_id_};
    }
    if (c.add_eos_token.value_or(false)) {
      if (t->eos_id_ < 0) throw Error(tc + ": add_eos_token is true but there is no eos_token", "set eos_token or add_eos_token false");
      t->around_.after = {t->eos_id_};
    }
  }
  for (const auto* ids : {&t->around_.before, &t->around_.after}) {
    for (int64_t id : *ids) {
      if (!t->token_to_id_known(id)) {
        hf::bad_json(root.child("post_processor"), "special token id " + std::to_string(id) + " has no token");
      }
    }
  }

  t->chat_ = {c.chat_template, c.bos_token.value_or(""), c.eos_token.value_or(""), c.pad_token.value_or("")};
  t->skip_.assign(static_cast<size_t>(t->vocab_size_), false);
  for (const hf::AddedToken& a : t->added_.tokens()) {
    if (a.special) t->skip_[static_cast<size_t>(a.id)] = true;
  }
  for (int64_t id : {t->bos_id_, t->eos_id_, t->pad_id_}) {
    if (id >= 0) t->skip_[static_cast<size_t>(id)] = true;
  }
  return t;
}

bool HfTokenizer::token_to_id_known(int64_t id) const { return added_.by_id(id) != nullptr || bpe_->id_to_token(id) != nullptr; }

std::optional<int64_t> HfTokenizer::token_to_id(const std::string& token) const {
  if (auto id = added_.id_of(token)) return id;
  if (auto id = bpe_->token_to_id(token)) return *id;
  return std::nullopt;
}

void HfTokenizer::encode_plain(std::string_view text, std::vector<int64_t>& ids) const {
  std::string normalized(text);
  if (normalizer_) normalizer_->normalize(normalized);
  std::vector<hf::Segment> segments;
  added_.split(normalized, hf::Matching::kNormalized, segments);
  hf::Pieces pieces;
  for (const hf::Segment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    pieces.items.assign(1, s.text);
    pieces.storage.clear();
    if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(pieces);
    for (std::string_view piece : pieces.items) bpe_->tokenize(piece, ids);
  }
}

std::vector<int64_t> HfTokenizer::encode(const std::string& text, bool add_bos) const {
  if (const size_t bad = find_invalid_utf8(text); bad != std::string::npos) {
    throw Error("text to encode is not valid UTF-8 (byte " + std::to_string(bad) + " of " + std::to_string(text.size()) + ")",
                "pass UTF-8 text; decode other encodings before tokenizing");
  }
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_bos) ids = around_.before;
  std::vector<hf::Segment> segments;
  added_.split(text, hf::Matching::kRaw, segments);
  for (const hf::Segment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      encode_plain(s.text, ids);
    }
  }
  if (add_bos) ids.insert(ids.end(), around_.after.begin(), around_.after.end());
  return ids;
}

std::vector<std::string> HfTokenizer::pre_tokenize(const std::string& text) const {
  std::string normalized(text);
  if (normalizer_) normalizer_->normalize(normalized);
  hf::Pieces pieces;
  pieces.items = {normalized};
  if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(pieces);
  return {pieces.items.begin(), pieces.items.end()};
}

std::string HfTokenizer::decode(const std::vector<int64_t>& ids, SpecialTokens special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id >= (int64_t{1} << 31)) {
      throw Error("token id " + std::to_string(id) + " cannot be decoded (ids are in [0, 2^31))",
                  "decode ids produced by a model with this tokenizer");
    }
    if (special == SpecialTokens::kSkip && id < vocab_size_ && skip_[static_cast<size_t>(id)]) continue;
    if (const hf::AddedToken* a = added_.by_id(id)) {
      tokens.push_back(a->content);
    } else if (const std::string* s = bpe_->id_to_token(id)) {
      tokens.push_back(*s);
    }
  }
  return hf::decode_tokens(decoder_.get(), std::move(tokens));
}

void HfTokenizer::save(const std::string& dir) const {
  for (const auto& [name, bytes] : files_) {
    write_file_atomic((fs::path(dir) / name).string(), bytes, {.mode = 0644, .parent_dirs = ParentDirs::kCreate});
  }
}

}  // namespace moerl::model
