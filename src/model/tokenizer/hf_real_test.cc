// The real tokenizers beyond the reference corpus: special ids and stop ids from their
// config files (Qwen3's generation_config.json stops on <|im_end|> and <|endoftext|>),
// add_bos per family, hostile inputs (megabyte runs, one long word, emoji soup, lone
// special-token fragments) that must round-trip, and concurrent encodes sharing the cache.
#include <gtest/gtest.h>

#include <thread>

#include "base/deadline.h"
#include "model/tokenizer/test_data.h"

namespace moerl::model {
namespace {

using Ids = std::vector<int64_t>;
using testing::real_tokenizer;
using testing::real_tokenizer_dir;

// A copy of a real tokenizer's directory plus a generation_config.json.
std::unique_ptr<HfTokenizer> with_generation_config(const std::string& name, const std::string& gen) {
  const std::string src = real_tokenizer_dir(name);
  const std::string dir = ::testing::TempDir() + "/tok_gen_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) std::filesystem::copy_file(src + "/" + f, dir + "/" + f);
  std::ofstream(dir + "/generation_config.json") << gen;
  return HfTokenizer::load(dir);
}

TEST(HfReal, Qwen3SpecialIdsAndStopIds) {
  // Qwen3's published generation_config.json.
  auto tok = with_generation_config(
      "qwen3", R"({"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
                   "temperature": 0.6, "top_k": 20, "top_p": 0.95})");
  EXPECT_EQ(tok->eos_id(), 151645);  // tokenizer_config.json: eos_token <|im_end|>
  EXPECT_EQ(tok->pad_id(), 151643);  // pad_token <|endoftext|>
  EXPECT_EQ(tok->bos_id(), 151643);  // no bos_token: generation_config's bos_token_id
  EXPECT_EQ(tok->stop_ids(), (Ids{151645, 151643}));
  EXPECT_EQ(tok->vocab_size(), 151669);
  EXPECT_EQ(tok->token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok->token_to_id("<think>"), 151667);
  const Tokenizer::ChatTemplateInfo chat = tok->chat_template();
  EXPECT_NE(chat.template_text.find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(chat.eos_token, "<|im_end|>");
  EXPECT_EQ(chat.bos_token, "");
  EXPECT_EQ(tok->encode("Hello, world!", /*add_bos=*/true), (Ids{9707, 11, 1879, 0}));  // add_bos_token false
  // Skipping specials drops <|im_start|>/<|im_end|> but keeps <think> (not special).
  const Ids ids = tok->encode("<|im_start|>assistant\n<think>\nok</think><|im_end|>", false);
  EXPECT_EQ(tok->decode(ids), "assistant\n<think>\nok</think>");
}

TEST(HfReal, AddBosPerFamily) {
  const HfTokenizer& ds = real_tokenizer("deepseek_v3");  // add_bos_token true
  EXPECT_EQ(ds.bos_id(), 0);
  EXPECT_EQ(ds.eos_id(), 1);
  EXPECT_EQ(ds.stop_ids(), (Ids{1}));
  EXPECT_EQ(ds.encode("Hello, world!", true), (Ids{0, 19923, 14, 2058, 3}));
  EXPECT_NE(ds.chat_template().template_text.find("<｜Assistant｜>"), std::string::npos);
  const HfTokenizer& llama = real_tokenizer("llama2");  // the post-processor's <s>
  EXPECT_EQ(llama.bos_id(), 1);
  EXPECT_EQ(llama.eos_id(), 2);
  EXPECT_EQ(llama.pad_id(), 2);  // pad_token null: EOS
  EXPECT_EQ(llama.encode("hi", true).front(), 1);
  EXPECT_EQ(llama.encode("hi", false).front(), llama.encode("hi", true)[1]);
  EXPECT_TRUE(llama.chat_template().template_text.empty());
}

TEST(HfReal, HostileInputsRoundTrip) {
  std::string emoji;
  for (int i = 0; i < 2000; ++i) emoji += "👨‍👩‍👧‍👦🇺🇸❤️‍🔥";
  const std::vector<std::string> texts = {
      std::string(1 << 18, ' ') + "x",  // a quarter megabyte of spaces: one pre-token
      std::string(200000, 'a'),         // one pre-token of 200k letters: the heap merge loop
      std::string(50000, '\n') + "\r\n\t\v\f",
      emoji,
      "<|im_start|<|im_end|<｜begin<｜User｜<s</s<unk",  // fragments of special tokens
      std::string(30000, '9'),
  };
  const double t0 = now_seconds();
  for (const std::string& name : testing::real_tokenizer_names()) {
    const HfTokenizer& tok = real_tokenizer(name);
    for (size_t i = 0; i < texts.size(); ++i) {
      const Ids ids = tok.encode(texts[i], false);
      const std::string back = tok.decode(ids, SpecialTokens::kKeep);
      // Llama-2 prepends "▁" and its decoder strips one leading space: both cancel out.
      EXPECT_EQ(back, texts[i]) << name << " text " << i;
      for (int64_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size()) << name << " text " << i;
    }
  }
  EXPECT_LT(now_seconds() - t0, 60.0) << "hostile inputs took minutes: a quadratic path?";
}

TEST(HfReal, ConcurrentEncodesAgree) {
  const HfTokenizer& tok = real_tokenizer("qwen3");
  std::vector<std::string> texts;
  for (const auto& row : testing::read_jsonl_file(testing::tokenizer_fixture("corpus.jsonl"))) texts.push_back(row.at("text"));
  // Words no thread has seen yet (distinct per thread and round) keep the cache inserting while
  // the other threads read it.
  const auto fresh = [&](int k, int rep, size_t i) { return texts[i] + " w" + std::to_string(k * 1000 + rep) + "q"; };
  constexpr int kThreads = 4, kRounds = 10;
  std::vector<std::vector<Ids>> got(kThreads);
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < kRounds; ++rep) {
        for (size_t i = 0; i < texts.size(); ++i) got[k].push_back(tok.encode(fresh(k, rep, i), false));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < kThreads; ++k) {
    size_t n = 0;
    for (int rep = 0; rep < kRounds; ++rep) {
      for (size_t i = 0; i < texts.size(); ++i, ++n) {
        ASSERT_EQ(got[k][n], tok.encode(fresh(k, rep, i), false)) << "thread " << k << " round " << rep << " line " << i + 1;
      }
    }
  }
}

}  // namespace
}  // namespace moerl::model
