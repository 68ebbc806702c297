// The real Qwen3 and DeepSeek-V3 chat templates rendered by moerl's Jinja interpreter give
// byte for byte what transformers' apply_chat_template gives (tests/fixtures/tokenizers/
// expected/<name>/chat.jsonl, made by tests/fixtures/make_tokenizer_refs.py), and the same
// ids; a tokenizer without a template (Llama-2's) is a clear error.
#include <gtest/gtest.h>

#include "base/error.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/test_data.h"

namespace moerl::model {
namespace {

using testing::read_jsonl_file;
using testing::real_tokenizer;
using testing::tokenizer_fixture;

nlohmann::ordered_json conversations() {
  std::ifstream f(tokenizer_fixture("conversations.json"));
  EXPECT_TRUE(f.good());
  return nlohmann::ordered_json::parse(f);
}

void expect_matches_transformers(const std::string& name) {
  const HfTokenizer& tok = real_tokenizer(name);
  const ChatTemplate tmpl(tok.chat_template(), name);
  const auto convs = conversations();
  const auto want = read_jsonl_file(tokenizer_fixture("expected/" + name + "/chat.jsonl"));
  ASSERT_EQ(convs.size(), want.size());
  ASSERT_GE(convs.size(), 10u);
  for (size_t i = 0; i < convs.size(); ++i) {
    nlohmann::ordered_json vars = nlohmann::ordered_json::object();
    for (const auto& [k, v] : convs[i].items()) {
      if (k != "messages" && k != "add_generation_prompt") vars[k] = v;
    }
    const std::string text = tmpl.render(convs[i].at("messages"), convs[i].at("add_generation_prompt").get<bool>(), vars);
    EXPECT_EQ(text, want[i].at("text").get<std::string>()) << name << " conversation " << i;
    EXPECT_EQ(nlohmann::json(tok.encode(text, false)), want[i].at("ids")) << name << " conversation " << i;
  }
}

TEST(ChatTemplate, Qwen3MatchesTransformers) { expect_matches_transformers("qwen3"); }

TEST(ChatTemplate, DeepSeekV3MatchesTransformers) { expect_matches_transformers("deepseek_v3"); }

TEST(ChatTemplate, RenderChatPassesSpecialTokensAndExtras) {
  Tokenizer::ChatTemplateInfo info{"{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}|{{ tools is none }}|"
                                   "{{ messages | length }}|{{ add_generation_prompt }}|{{ enable_thinking }}",
                                   "<s>", "</s>", ""};
  const auto messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(render_chat(info, messages, true, {{"enable_thinking", false}}), "<s>|</s>|False|True|1|True|False");
}

TEST(ChatTemplate, ATokenizerWithoutATemplateIsAClearError) {
  const HfTokenizer& tok = real_tokenizer("llama2");
  ASSERT_TRUE(tok.chat_template().template_text.empty());
  try {
    ChatTemplate(tok.chat_template(), "/models/llama2");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("the tokenizer in /models/llama2 has no chat template"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("tokenizer_config.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(render_chat(tok.chat_template(), nlohmann::ordered_json::array(), false, nullptr), Error);
}

TEST(ChatTemplate, TheTemplatesRaiseExceptionSurfaces) {
  Tokenizer::ChatTemplateInfo info{"{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}"
                                   "{{ raise_exception('Conversation roles must be user or assistant') }}{% endif %}{% endfor %}",
                                   "", "", ""};
  try {
    render_chat(info, nlohmann::ordered_json::parse(R"([{"role": "tool", "content": "x"}])"), false, nullptr);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("line 1 col 71: raise_exception: Conversation roles must be user or assistant"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moerl::model
