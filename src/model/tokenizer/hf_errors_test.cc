// Malformed and unsupported tokenizer files: each is a moerl::Error whose message names the
// file, the JSON path or the component type, never a crash or a silent wrong tokenizer.
#include <gtest/gtest.h>

#include "base/error.h"
#include "model/tokenizer/test_data.h"
#include "model/tokenizer/tiny_tokenizers.h"

namespace moerl::model {
namespace {

using testing::tiny_byte_level_json;
using testing::tiny_sentencepiece_json;
using testing::write_tokenizer_dir;

// Loads DIR with `files`; the load must throw an Error whose text holds every `needle`.
void expect_load_error(const std::string& name, const std::map<std::string, std::string>& files,
                       const std::vector<std::string>& needles) {
  const std::string dir = write_tokenizer_dir(name, files);
  try {
    HfTokenizer::load(dir);
    ADD_FAILURE() << name << ": loaded without an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const auto& n : needles) EXPECT_NE(what.find(n), std::string::npos) << name << ": \"" << n << "\" not in: " << what;
    EXPECT_NE(what.find("HINT"), std::string::npos) << what;
  }
}

void expect_json_error(const std::string& name, const nlohmann::json& j, const std::vector<std::string>& needles) {
  std::vector<std::string> all = needles;
  all.push_back("tokenizer.json");
  expect_load_error(name, {{"tokenizer.json", j.dump()}}, all);
}

TEST(HfErrors, BrokenJson) {
  expect_load_error("trunc", {{"tokenizer.json", tiny_byte_level_json().dump().substr(0, 500)}}, {"tokenizer.json", "not valid JSON"});
  expect_load_error("array", {{"tokenizer.json", "[1, 2]"}}, {"tokenizer.json", "expected a JSON object"});
  nlohmann::json j = tiny_byte_level_json();
  j.erase("model");
  expect_json_error("nomodel", j, {"missing field \"model\""});
}

TEST(HfErrors, UnsupportedComponentsNameTheirType) {
  nlohmann::json j = tiny_byte_level_json();
  j["model"]["type"] = "Unigram";
  expect_json_error("unigram", j, {"model", "\"Unigram\" is not supported"});
  j = tiny_byte_level_json();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "BertNormalizer"}}}}};
  expect_json_error("bert", j, {"normalizer.normalizers[0]", "\"BertNormalizer\""});
  j = tiny_byte_level_json();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_json_error("ws", j, {"pre_tokenizer", "\"Whitespace\""});
  j = tiny_byte_level_json();
  j["decoder"] = {{"type", "WordPiece"}};
  expect_json_error("wp", j, {"decoder", "\"WordPiece\""});
  j = tiny_byte_level_json();
  j["post_processor"] = {{"type", "BertProcessing"}};
  expect_json_error("bertpp", j, {"post_processor", "\"BertProcessing\""});
  j = tiny_byte_level_json();
  j["model"]["dropout"] = 0.1;
  expect_json_error("dropout", j, {"model.dropout", "not supported"});
}

TEST(HfErrors, BadMergesAndVocabulary) {
  nlohmann::json j = tiny_byte_level_json();
  j["model"]["merges"][3] = "hell o x";
  expect_json_error("merge3", j, {"model.merges[3]", "two tokens"});
  j = tiny_byte_level_json();
  j["model"]["merges"][1] = "h zz";
  expect_json_error("mergeoov", j, {"model.merges[1]", "\"zz\" is not in the vocabulary"});
  j = tiny_byte_level_json();
  j["model"]["merges"].push_back("x y");
  expect_json_error("mergeresult", j, {"model.merges[10]", "\"xy\" is not in the vocabulary"});
  j = tiny_byte_level_json();
  j["model"]["merges"][0] = 17;
  expect_json_error("mergetype", j, {"model.merges[0]"});
  j = tiny_byte_level_json();
  j["model"]["vocab"]["dup"] = 5;
  expect_json_error("dupid", j, {"model.vocab", "id 5"});
  j = tiny_byte_level_json();
  j["model"]["vocab"]["neg"] = -3;
  expect_json_error("negid", j, {"model.vocab", "\"neg\""});
}

TEST(HfErrors, BadComponentsAndAddedTokens) {
  nlohmann::json j = tiny_byte_level_json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(\\p{L}+"}}}, {"behavior", "Isolated"}, {"invert", false}};
  expect_json_error("regex", j, {"pre_tokenizer.pattern.Regex", "does not compile", "(\\p{L}+"});
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}};
  expect_json_error("behavior", j, {"pre_tokenizer.behavior", "Sideways"});
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Glob", "*"}}}, {"behavior", "Isolated"}};
  expect_json_error("pattern", j, {"pre_tokenizer.pattern", "\"String\""});
  j = tiny_byte_level_json();
  j["added_tokens"] = {{{"id", 300}, {"content", ""}}};
  expect_json_error("emptyadded", j, {"added_tokens[0].content", "empty"});
  j["added_tokens"] = {{{"id", 300}, {"content", "a"}}, {{"id", 300}, {"content", "b"}}};
  expect_json_error("dupadded", j, {"added_tokens[1].id", "two added tokens"});
  j["added_tokens"] = {{{"content", "a"}}};
  expect_json_error("noid", j, {"added_tokens[0]", "\"id\""});
  j = tiny_sentencepiece_json();
  j["post_processor"]["single"][0]["SpecialToken"]["id"] = "<bos>";
  expect_json_error("template", j, {"post_processor", "\"<bos>\""});
  j = tiny_sentencepiece_json();
  j["decoder"]["decoders"][3]["content"] = "ab";
  expect_json_error("strip", j, {"decoder.decoders[3].content", "one character"});
}

TEST(HfErrors, ConfigsThatDoNotMatchTheVocabulary) {
  const std::string tj = tiny_sentencepiece_json().dump();
  expect_load_error("eos", {{"tokenizer.json", tj}, {"tokenizer_config.json", R"({"eos_token": "<|im_end|>"})"}},
                    {"tokenizer_config.json", "eos_token \"<|im_end|>\" is not a token"});
  expect_load_error("geneos", {{"tokenizer.json", tj}, {"generation_config.json", R"({"eos_token_id": [2, 99999]})"}},
                    {"generation_config.json", "eos_token_id 99999"});
  expect_load_error("gentype", {{"tokenizer.json", tj}, {"generation_config.json", R"({"eos_token_id": "2"})"}},
                    {"generation_config.json", "eos_token_id"});
  expect_load_error("badcfg", {{"tokenizer.json", tj}, {"tokenizer_config.json", "{\"eos_token\": "}},
                    {"tokenizer_config.json", "not valid JSON"});
  expect_load_error("tmpl", {{"tokenizer.json", tj}, {"tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "x"}]})"}},
                    {"chat_template", "\"default\"", "tool_use"});
  expect_load_error("addbos", {{"tokenizer.json", tiny_byte_level_json().dump()}, {"tokenizer_config.json", R"({"add_bos_token": true})"}},
                    {"add_bos_token", "no bos_token"});
}

TEST(HfErrors, TextThatIsNotUtf8) {
  auto tok = HfTokenizer::load(write_tokenizer_dir("utf8", {{"tokenizer.json", tiny_byte_level_json().dump()}}));
  try {
    tok->encode("ok \xff there", false);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8 (byte 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moerl::model
