// tokenize_jsonl (what `moerl tokenize` runs) in-process: one output line per input line,
// special tokens recognised in encode and kept in decode, and every kind of bad line an
// Error naming the file and the line, with no output file left behind.
#include <gtest/gtest.h>

#include "base/error.h"
#include "model/tokenizer/test_data.h"
#include "model/tokenizer/tiny_tokenizers.h"
#include "model/tokenizer/tokenize_jsonl.h"

namespace moerl::model {
namespace {

std::string write_file(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + "/tokjsonl_" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

std::unique_ptr<HfTokenizer> tiny() {
  nlohmann::json j = testing::tiny_byte_level_json();
  j["added_tokens"] = {{{"id", 266}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}};
  return HfTokenizer::load(testing::write_tokenizer_dir("jsonl", {{"tokenizer.json", j.dump()}}));
}

TEST(TokenizeJsonl, EncodesThenDecodesLineByLine) {
  auto tok = tiny();
  const std::string in = write_file("in.jsonl", "{\"text\": \"hello world\"}\n{\"text\": \"\", \"x\": 1}\r\n{\"text\": \"hello<|end|>\"}");
  const std::string ids = ::testing::TempDir() + "/tokjsonl_ids.jsonl";
  EXPECT_EQ(tokenize_jsonl(*tok, in, ids, TokenizeDirection::kEncode), 3);
  const auto rows = testing::read_jsonl_file(ids);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], nlohmann::json::parse(R"({"ids": [259, 264]})"));
  EXPECT_EQ(rows[1], nlohmann::json::parse(R"({"ids": []})"));
  EXPECT_EQ(rows[2], nlohmann::json::parse(R"({"ids": [259, 266]})"));
  const std::string texts = ::testing::TempDir() + "/tokjsonl_texts.jsonl";
  EXPECT_EQ(tokenize_jsonl(*tok, ids, texts, TokenizeDirection::kDecode), 3);
  const auto back = testing::read_jsonl_file(texts);
  EXPECT_EQ(back[0].at("text"), "hello world");
  EXPECT_EQ(back[1].at("text"), "");
  EXPECT_EQ(back[2].at("text"), "hello<|end|>");  // special tokens kept
}

TEST(TokenizeJsonl, BadLinesNameTheirLine) {
  auto tok = tiny();
  const std::string out = ::testing::TempDir() + "/tokjsonl_bad_out.jsonl";
  const auto expect_error = [&](const std::string& content, TokenizeDirection d, const std::string& needle,
                                const Tokenizer* with = nullptr) {
    std::filesystem::remove(out);
    const std::string in = write_file("bad.jsonl", content);
    try {
      tokenize_jsonl(with ? *with : *tok, in, out, d);
      ADD_FAILURE() << "no error for: " << content;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(in + " " + needle), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(out));
  };
  const auto kEnc = TokenizeDirection::kEncode, kDec = TokenizeDirection::kDecode;
  expect_error("{\"text\": \"a\"}\n\n", kEnc, "line 2 is blank");
  expect_error("{\"text\": \"a\"}\n  \t\n{\"text\": \"b\"}\n", kEnc, "line 2 is blank");
  expect_error("{\"text\": 5}\n", kEnc, "line 1 has no string field \"text\"");
  expect_error("{\"ids\": [1]}\n", kEnc, "line 1 has no string field \"text\"");
  expect_error("[1, 2]\n", kEnc, "line 1 is not a JSON object");
  expect_error("{\"text\": \"a\"}\n{\"text\": \"a\"} junk\n", kEnc, "line 2 is not valid JSON");
  expect_error("{\"text\": \"a\"}\n", kDec, "line 1 has no list field \"ids\"");
  expect_error("{\"ids\": {\"a\": 1}}\n", kDec, "line 1 has no list field \"ids\"");
  expect_error("{\"ids\": [1, 2.5]}\n", kDec, "line 1: ids must be integers");
  expect_error("{\"ids\": [1]}\n{\"ids\": [-1]}\n", kDec, "line 2: token id -1");
  EXPECT_THROW(tokenize_jsonl(*tok, "/no/such/file.jsonl", out, kEnc), Error);
  // A character tokenizer cannot encode non-ASCII: the error still names the line.
  const CharTokenizer chars;
  expect_error("{\"text\": \"ok\"}\n{\"text\": \"é\"}\n", kEnc, "line 2: text has byte 195", &chars);
}

}  // namespace
}  // namespace moerl::model
