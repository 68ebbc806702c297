// `moerl chat` run as a subprocess (MOERL_BIN), as a user runs it: the real Qwen3 and
// DeepSeek-V3 templates over the reference conversations give transformers' texts and ids,
// and bad input or a tokenizer without a template exits non-zero with one paragraph.
#include <gtest/gtest.h>

#include "model/tokenizer/test_data.h"

namespace moerl::model {
namespace {

namespace fs = std::filesystem;
using testing::read_jsonl_file;
using testing::tokenizer_fixture;

class CliChat : public testing::CliCommandTest {
 protected:
  CliChat() : CliCommandTest("chat") {}
};

TEST_F(CliChat, RendersTheConversationsAsTransformersDoes) {
  std::ifstream f(tokenizer_fixture("conversations.json"));
  std::vector<std::string> lines;
  for (const auto& c : nlohmann::ordered_json::parse(f)) lines.push_back(c.dump());
  const std::string in = write_lines("conversations.jsonl", lines);
  for (const std::string name : {"qwen3", "deepseek_v3"}) {
    const std::string out = scratch(name + "_chat.jsonl");
    CapturedRun r = run({"--model", testing::real_tokenizer_dir(name), "--input", in, "--output", out});
    ASSERT_EQ(r.status, 0) << r.output;
    const auto got = read_jsonl_file(out);
    const auto want = read_jsonl_file(tokenizer_fixture("expected/" + name + "/chat.jsonl"));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << name << " line " << i + 1;
  }
}

TEST_F(CliChat, BadInputFailsWithTheLineNumber) {
  const std::string qwen = testing::real_tokenizer_dir("qwen3");
  const auto expect_failure = [&](const std::string& dir, const std::vector<std::string>& lines, const std::string& needle) {
    const std::string out = scratch("bad_out.jsonl");
    fs::remove(out);
    CapturedRun r = run({"--model", dir, "--input", write_lines("bad.jsonl", lines), "--output", out});
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << "\"" << needle << "\" not in: " << r.output;
    EXPECT_NE(r.output.find("HINT"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out)) << "a failed run left an output file";
  };
  const std::string ok = R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true})";
  expect_failure(qwen, {ok, R"({"msgs": []})"}, "bad.jsonl line 2 has no list field \"messages\"");
  expect_failure(qwen, {ok, ok, "{not json"}, "line 3 is not valid JSON");
  expect_failure(qwen, {R"({"messages": [], "add_generation_prompt": "yes"})"}, "\"add_generation_prompt\" must be true or false");
  // Qwen3's template reads messages[0]: with none, jinja2 fails too.
  expect_failure(qwen, {R"({"messages": []})"}, "bad.jsonl line 1: chat template line");
  expect_failure(testing::real_tokenizer_dir("llama2"), {ok}, "has no chat template");
}

}  // namespace
}  // namespace moerl::model
