// HfTokenizer on hand-made tokenizer.json files (tiny_tokenizers.h), every expected id
// worked out by hand from the tokenizers semantics: the byte-level BPE and its merges, byte
// fallback and unk fusing, the post-processor's <s>, decoders, companion config files, save.
#include <gtest/gtest.h>

#include "base/error.h"
#include "model/tokenizer/test_data.h"
#include "model/tokenizer/tiny_tokenizers.h"

namespace moerl::model {
namespace {

using Ids = std::vector<int64_t>;
using testing::tiny_byte_level_json;
using testing::tiny_sentencepiece_json;
using testing::write_tokenizer_dir;

std::unique_ptr<HfTokenizer> load_json(const std::string& name, const nlohmann::json& j,
                                       std::map<std::string, std::string> more = {}) {
  more["tokenizer.json"] = j.dump();
  return HfTokenizer::load(write_tokenizer_dir(name, more));
}

TEST(HfTiny, ByteLevelBpeAppliesMergesByRank) {
  auto tok = load_json("bl", tiny_byte_level_json());
  EXPECT_EQ(tok->encode("hello world", false), (Ids{259, 264}));
  // GPT-2 split: "hello", " " (\s+(?!\S) leaves the last space to the word), " world".
  EXPECT_EQ(tok->encode("hello  world", false), (Ids{259, 32, 264}));
  EXPECT_EQ(tok->encode("hellohello", false), (Ids{259, 259}));  // both "l l" first, then "h e", ...
  EXPECT_EQ(tok->encode("xyz", false), (Ids{'x', 'y', 'z'}));
  EXPECT_EQ(tok->encode("   ", false), (Ids{265, 32}));   // one piece "   ": Ġ Ġ merges once
  EXPECT_EQ(tok->encode("é", false), (Ids{0xC3, 0xA9}));  // bytes, as their characters
  EXPECT_EQ(tok->encode("", true), Ids{});                 // ByteLevel post-processor adds nothing
  EXPECT_EQ(tok->decode({259, 264}), "hello world");
  EXPECT_EQ(tok->decode({0xE4, 0xBD}), "\xEF\xBF\xBD");   // half of 你: one U+FFFD
  EXPECT_EQ(tok->decode({0xE4, 0xBD, 0xA0}), "你");
  EXPECT_EQ(tok->vocab_size(), 266);
  EXPECT_EQ(tok->token_to_id("Ġworld"), 264);
  EXPECT_EQ(tok->token_to_id("world"), std::nullopt);
  EXPECT_EQ(tok->bos_id(), -1);  // no tokenizer_config.json: no special ids
  EXPECT_EQ(tok->eos_id(), -1);
  EXPECT_TRUE(tok->stop_ids().empty());
}

TEST(HfTiny, NfcNormalizerComposesBeforeBytes) {
  nlohmann::json j = tiny_byte_level_json();
  j["normalizer"] = {{"type", "NFC"}};
  auto tok = load_json("nfc", j);
  EXPECT_EQ(tok->encode("e\xCC\x81", false), (Ids{0xC3, 0xA9}));  // e + U+0301 -> é
  j["normalizer"] = {{"type", "NFD"}};
  EXPECT_EQ(load_json("nfd", j)->encode("é", false), (Ids{'e', 0xCC, 0x81}));
}

TEST(HfTiny, ByteFallbackAndTemplateBos) {
  auto tok = load_json("sp", tiny_sentencepiece_json());
  // "▁hi▁é": ▁ h -> ▁h, ▁h i -> ▁hi; é is not in the vocabulary: <0xC3> <0xA9>.
  EXPECT_EQ(tok->encode("hi é", false), (Ids{263, 259, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok->encode("hi", true), (Ids{1, 263}));
  EXPECT_EQ(tok->encode("", true), (Ids{1}));
  EXPECT_EQ(tok->decode({1, 263, 259, 3 + 0xC3, 3 + 0xA9}, SpecialTokens::kKeep), "<s> hi é");
  EXPECT_EQ(tok->decode({1, 263, 259, 3 + 0xC3, 3 + 0xA9}), "hi é");  // Strip drops the leading space
  // Byte pieces that are not UTF-8: one U+FFFD per byte (ByteFallback), not per sequence.
  EXPECT_EQ(tok->decode({3 + 0xC3, 3 + 0xC3}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // Each added-token segment is normalized alone: the text after <s> gets its own "▁".
  EXPECT_EQ(tok->encode("<s>hi</s>", false), (Ids{1, 263, 2}));
}

TEST(HfTiny, UnknownCharactersFuseIntoOneUnk) {
  nlohmann::json j = tiny_sentencepiece_json();
  j["model"]["byte_fallback"] = false;
  EXPECT_EQ(load_json("unk_fused", j)->encode("hé€", false), (Ids{262, 0}));
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(load_json("unk", j)->encode("hé€", false), (Ids{262, 0, 0}));
  j["model"]["unk_token"] = nullptr;  // no unk: dropped, as tokenizers does
  EXPECT_EQ(load_json("no_unk", j)->encode("hé€", false), (Ids{262}));
}

TEST(HfTiny, ConfigFilesGiveSpecialIdsAndStopIds) {
  const nlohmann::json tc = {{"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}, {"lstrip", false}}},
                             {"eos_token", "</s>"},
                             {"chat_template", "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"}};
  auto tok = load_json("cfg", tiny_sentencepiece_json(),
                       {{"tokenizer_config.json", tc.dump()}, {"generation_config.json", R"({"eos_token_id": [2, 0]})"}});
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->pad_id(), 2);  // no pad token: pads with EOS
  EXPECT_EQ(tok->stop_ids(), (Ids{2, 0}));
  const Tokenizer::ChatTemplateInfo chat = tok->chat_template();
  EXPECT_EQ(chat.template_text, tc["chat_template"].get<std::string>());
  EXPECT_EQ(chat.bos_token, "<s>");
  EXPECT_EQ(chat.eos_token, "</s>");
  EXPECT_EQ(chat.pad_token, "");

  tok = load_json("cfg_int", tiny_sentencepiece_json(),
                  {{"generation_config.json", R"({"eos_token_id": 2, "pad_token_id": 0, "bos_token_id": 1})"},
                   {"chat_template.jinja", "{{ messages[0].content }}"}});
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->pad_id(), 0);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->stop_ids(), (Ids{2}));
  EXPECT_EQ(tok->chat_template().template_text, "{{ messages[0].content }}");

  // add_bos_token false overrides the post-processor's <s>; true on a byte-level tokenizer adds it.
  EXPECT_EQ(load_json("nobos", tiny_sentencepiece_json(), {{"tokenizer_config.json", R"({"add_bos_token": false})"}})
                ->encode("hi", true),
            (Ids{263}));
  EXPECT_EQ(load_json("addbos", tiny_byte_level_json(),
                      {{"tokenizer_config.json", R"({"add_bos_token": true, "bos_token": "he"})"}})
                ->encode("hello", true),
            (Ids{257, 259}));
}

TEST(HfTiny, DecodeSkipsSpecialsOnlyWhenAsked) {
  nlohmann::json j = tiny_byte_level_json();
  j["added_tokens"] = {{{"id", 266}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}},
                       {{"id", 267}, {"content", "<think>"}, {"special", false}, {"normalized", false}}};
  auto tok = load_json("skip", j, {{"tokenizer_config.json", R"({"eos_token": "<|end|>"})"}});
  const Ids ids = tok->encode("<think>hello<|end|>", false);
  EXPECT_EQ(ids, (Ids{267, 259, 266}));
  EXPECT_EQ(tok->decode(ids, SpecialTokens::kKeep), "<think>hello<|end|>");
  EXPECT_EQ(tok->decode(ids), "<think>hello");
  EXPECT_EQ(tok->eos_id(), 266);
  EXPECT_EQ(tok->token_to_id("<think>"), 267);
  EXPECT_EQ(tok->vocab_size(), 268);
  EXPECT_EQ(tok->decode({259, 5000, 264}), "hello world");  // an id with no token is skipped
  EXPECT_THROW(tok->decode({-1}), Error);
}

TEST(HfTiny, SaveWritesTheFilesItRead) {
  const std::string tc = R"({"eos_token": "</s>", "chat_template": "x"})", gc = R"({"eos_token_id": [2, 1]})";
  auto tok = load_json("save_src", tiny_sentencepiece_json(), {{"tokenizer_config.json", tc}, {"generation_config.json", gc}});
  const std::string dir = ::testing::TempDir() + "/tok_save_dst/nested";
  std::filesystem::remove_all(dir);
  tok->save(dir);
  std::filesystem::remove_all(::testing::TempDir() + "/tok_save_src");  // save() must not need the source
  auto back = load_tokenizer(dir);
  ASSERT_NE(dynamic_cast<const HfTokenizer*>(back.get()), nullptr);
  EXPECT_EQ(back->encode("hi hi é", true), tok->encode("hi hi é", true));
  EXPECT_EQ(back->stop_ids(), (Ids{2, 1}));
  std::ifstream f(dir + "/tokenizer_config.json");
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), tc);
}

TEST(HfTiny, LoadTokenizerPicksTheFileThatIsThere) {
  const std::string dir = write_tokenizer_dir("pick", {{"tokenizer.json", tiny_byte_level_json().dump()}});
  EXPECT_NE(dynamic_cast<const HfTokenizer*>(load_tokenizer(dir).get()), nullptr);
  CharTokenizer().save(dir);  // both: tokenizer.json wins
  EXPECT_NE(dynamic_cast<const HfTokenizer*>(load_tokenizer(dir).get()), nullptr);
  std::filesystem::remove(dir + "/tokenizer.json");
  EXPECT_NE(dynamic_cast<const CharTokenizer*>(load_tokenizer(dir).get()), nullptr);
  std::filesystem::remove(dir + "/moerl_tokenizer.json");
  try {
    load_tokenizer(dir);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moerl::model
