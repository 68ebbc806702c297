// `moerl tokenize` run as a subprocess (MOERL_BIN), as a user runs it: the real Qwen3
// tokenizer over the reference corpus gives the reference ids, --decode gives the reference
// texts, and bad input exits non-zero with one paragraph naming the line.
#include <gtest/gtest.h>

#include "model/tokenizer/test_data.h"
#include "model/tokenizer/tiny_tokenizers.h"

namespace moerl::model {
namespace {

namespace fs = std::filesystem;
using testing::read_jsonl_file;
using testing::tokenizer_fixture;

class CliTokenize : public testing::CliCommandTest {
 protected:
  CliTokenize() : CliCommandTest("tokenize") {}
};

TEST_F(CliTokenize, EncodesAndDecodesTheCorpusAsTokenizersDoes) {
  for (const std::string name : {"qwen3", "llama2"}) {
    const std::string dir = testing::real_tokenizer_dir(name);
    const std::string out = scratch(name + "_ids.jsonl");
    CapturedRun r = run({"--model", dir, "--input", tokenizer_fixture("corpus.jsonl"), "--output", out});
    ASSERT_EQ(r.status, 0) << r.output;
    const auto got = read_jsonl_file(out);
    const auto want = read_jsonl_file(tokenizer_fixture("expected/" + name + "/encode.jsonl"));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << name << " line " << i + 1;

    const auto rows = read_jsonl_file(tokenizer_fixture("expected/" + name + "/decode.jsonl"));
    std::vector<std::string> lines;
    for (const auto& row : rows) lines.push_back(nlohmann::json{{"ids", row.at("ids")}}.dump());
    const std::string text_out = scratch(name + "_text.jsonl");
    r = run({"--model", dir, "--input", write_lines(name + "_decode_in.jsonl", lines), "--output", text_out, "--decode"});
    ASSERT_EQ(r.status, 0) << r.output;
    const auto texts = read_jsonl_file(text_out);
    ASSERT_EQ(texts.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(texts[i].at("text"), rows[i].at("text")) << name << " row " << i + 1;
  }
}

TEST_F(CliTokenize, AModelDirectoryWorksToo) {
  const std::string dir = scratch("model_dir");
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(testing::fixture_dir("qwen3_moe_tied/config.json"), dir + "/config.json");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::copy_file(testing::real_tokenizer_dir("qwen3") + "/" + f, dir + "/" + f);
  }
  const std::string out = scratch("model_dir_out.jsonl");
  CapturedRun r = run({"--model", dir, "--input", write_lines("hello.jsonl", {R"({"text": "Hello, world!", "id": 7})"}),
                            "--output", out});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(read_jsonl_file(out).at(0), nlohmann::json::parse(R"({"ids": [9707, 11, 1879, 0]})"));
}

TEST_F(CliTokenize, BadInputFailsWithTheLineNumber) {
  // A tiny tokenizer: each run loads it in no time.
  const std::string dir = testing::write_tokenizer_dir("cli_tiny", {{"tokenizer.json", testing::tiny_byte_level_json().dump()}});
  const auto expect_failure = [&](const std::vector<std::string>& lines, bool decode, const std::string& needle) {
    const std::string out = scratch("bad_out.jsonl");
    fs::remove(out);
    std::vector<std::string> args = {"--model", dir, "--input", write_lines("bad.jsonl", lines), "--output", out};
    if (decode) args.push_back("--decode");
    CapturedRun r = run(args);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << "\"" << needle << "\" not in: " << r.output;
    EXPECT_NE(r.output.find("HINT"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out)) << "a failed run left an output file";
  };
  expect_failure({R"({"text": "a"})", R"({"text": "b"})", R"({"txt": "c"})"}, false, "bad.jsonl line 3 has no string field \"text\"");
  expect_failure({R"({"text": "a"})", "", R"({"text": "c"})"}, false, "line 2 is blank");
  expect_failure({R"({"text": "a"})", "{not json"}, false, "line 2 is not valid JSON");
  expect_failure({R"({"ids": [1, 2]})", R"({"ids": [1, "x"]})"}, true, "line 2: ids must be integers");
  expect_failure({R"({"ids": [-4]})"}, true, "line 1: token id -4");

  CapturedRun r = run({"--model", scratch("no_such_model"), "--input", "x", "--output", scratch("o.jsonl")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("has no tokenizer"), std::string::npos) << r.output;
  r = run({"--model", dir, "--input", scratch("missing.jsonl"), "--output", scratch("o.jsonl")});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("cannot read"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace moerl::model
