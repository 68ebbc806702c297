#include "model/tokenizer/tokenizer_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/tokenizer/json_util.h"

namespace moerl::model::hf {

namespace {

namespace fs = std::filesystem;

std::optional<std::string> token_content(const nlohmann::json& cfg, const std::string& key, const JsonPlace& at) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return string_field(*it, "content", at.child(key));
  bad_json(at.child(key), "expected a token string or an AddedToken object with \"content\", found " + it->dump());
}

std::optional<int64_t> token_id(const nlohmann::json& cfg, const std::string& key, const JsonPlace& at) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() || it->get<int64_t>() < 0) bad_json(at.child(key), "expected a token id >= 0, found " + it->dump());
  return it->get<int64_t>();
}

std::string chat_template_of(const nlohmann::json& cfg, const JsonPlace& at) {
  auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {  // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
    std::string names;
    for (size_t i = 0; i < it->size(); ++i) {
      const JsonPlace t_at = at.child("chat_template").index(i);
      const std::string name = string_field((*it)[i], "name", t_at);
      if (name == "default") return string_field((*it)[i], "template", t_at);
      names += (names.empty() ? "" : ", ") + name;
    }
    bad_json(at.child("chat_template"), "a list of templates needs one named \"default\" (found: " + names + ")");
  }
  bad_json(at.child("chat_template"), "expected a template string or a list of {name, template}");
}

}  // namespace

TokenizerConfig read_tokenizer_config(const std::string& dir) {
  TokenizerConfig c;
  const fs::path tc = fs::path(dir) / "tokenizer_config.json";
  if (fs::exists(tc)) {
    const nlohmann::json cfg = read_json_file(tc.string());
    const JsonPlace at{tc.string(), ""};
    if (!cfg.is_object()) bad_json(at, "expected a JSON object");
    c.bos_token = token_content(cfg, "bos_token", at);
    c.eos_token = token_content(cfg, "eos_token", at);
    c.pad_token = token_content(cfg, "pad_token", at);
    for (const char* key : {"add_bos_token", "add_eos_token"}) {
      if (!cfg.contains(key) || cfg[key].is_null()) continue;
      (std::string(key) == "add_bos_token" ? c.add_bos_token : c.add_eos_token) = bool_field_or(cfg, key, at, false);
    }
    c.chat_template = chat_template_of(cfg, at);
  }
  const fs::path jinja = fs::path(dir) / "chat_template.jinja";
  if (c.chat_template.empty() && fs::exists(jinja)) {
    std::ifstream f(jinja, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    c.chat_template = ss.str();
  }
  const fs::path gc = fs::path(dir) / "generation_config.json";
  if (fs::exists(gc)) {
    const nlohmann::json cfg = read_json_file(gc.string());
    const JsonPlace at{gc.string(), ""};
    if (!cfg.is_object()) bad_json(at, "expected a JSON object");
    if (auto it = cfg.find("eos_token_id"); it != cfg.end() && !it->is_null()) {
      if (it->is_array()) {
        for (size_t i = 0; i < it->size(); ++i) {
          const nlohmann::json& v = (*it)[i];
          if (!v.is_number_integer() || v.get<int64_t>() < 0) bad_json(at.child("eos_token_id").index(i), "expected a token id >= 0, found " + v.dump());
          c.generation_eos_ids.push_back(v.get<int64_t>());
        }
      } else {
        c.generation_eos_ids.push_back(*token_id(cfg, "eos_token_id", at));
      }
    }
    c.generation_bos_id = token_id(cfg, "bos_token_id", at);
    c.generation_pad_id = token_id(cfg, "pad_token_id", at);
  }
  return c;
}

}  // namespace moerl::model::hf
