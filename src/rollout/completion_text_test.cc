// completion_text cuts a generation at the first of the tokenizer's stop ids, not only at
// eos_id(): Qwen3 ends a chat turn with <|im_end|> and stops on <|endoftext|> as well.
#include <gtest/gtest.h>

#include "rollout/group_rollout.h"

namespace moerl::rollout {
namespace {

// Ids 0..9 decode to 'a'..'j'; EOS is 9, and generation also stops on 4.
class TwoStopTokenizer final : public model::Tokenizer {
 public:
  std::vector<int64_t> encode(const std::string& text, bool add_bos) const override {
    std::vector<int64_t> ids;
    for (char c : text) ids.push_back(c - 'a');
    return ids;
  }
  std::string decode(const std::vector<int64_t>& ids, model::SpecialTokens) const override {
    std::string s;
    for (int64_t id : ids) s.push_back(static_cast<char>('a' + id));
    return s;
  }
  int64_t vocab_size() const override { return 10; }
  int64_t pad_id() const override { return 9; }
  int64_t bos_id() const override { return -1; }
  int64_t eos_id() const override { return 9; }
  std::vector<int64_t> stop_ids() const override { return {9, 4}; }
  std::optional<int64_t> token_to_id(const std::string&) const override { return std::nullopt; }
  void save(const std::string&) const override {}
};

TEST(CompletionText, StopsAtEveryStopId) {
  const TwoStopTokenizer tok;
  EXPECT_EQ(completion_text(tok, {1, 2, 4, 3}), "bc");
  EXPECT_EQ(completion_text(tok, {1, 2, 9, 3}), "bc");
  EXPECT_EQ(completion_text(tok, {1, 2, 3}), "bcd");
  EXPECT_EQ(completion_text(tok, {4}), "");
}

TEST(CompletionText, CharTokenizerStopsAtEos) {
  const model::CharTokenizer tok;
  std::vector<int64_t> ids = tok.encode("12", false);
  ids.push_back(tok.eos_id());
  for (int64_t id : tok.encode("junk", false)) ids.push_back(id);
  EXPECT_EQ(completion_text(tok, ids), "12");
}

}  // namespace
}  // namespace moerl::rollout
