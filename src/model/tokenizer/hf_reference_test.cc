// The real Qwen3, DeepSeek-V3 and Llama-2 tokenizer.json files against references made with
// Hugging Face tokenizers 0.23.2 (tests/fixtures/make_tokenizer_refs.py): identical ids for
// every corpus line, identical decodes (specials kept and skipped, byte pieces that do not
// form UTF-8 included), and encode -> decode round trips.
#include <gtest/gtest.h>

#include "model/tokenizer/test_data.h"
#include "base/utf8.h"

namespace moerl::model {
namespace {

using testing::read_jsonl_file;
using testing::real_tokenizer;
using testing::tokenizer_fixture;

std::vector<std::string> corpus() {
  std::vector<std::string> out;
  for (const auto& row : read_jsonl_file(tokenizer_fixture("corpus.jsonl"))) out.push_back(row.at("text"));
  return out;
}

std::string show(const std::vector<int64_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

class RealTokenizer : public ::testing::TestWithParam<std::string> {};

TEST_P(RealTokenizer, EncodeMatchesTokenizersOnEveryCorpusLine) {
  const HfTokenizer& tok = real_tokenizer(GetParam());
  const std::vector<std::string> texts = corpus();
  const auto expected = read_jsonl_file(tokenizer_fixture("expected/" + GetParam() + "/encode.jsonl"));
  ASSERT_EQ(expected.size(), texts.size());
  int mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int64_t> want = expected[i].at("ids").get<std::vector<int64_t>>();
    const std::vector<int64_t> got = tok.encode(texts[i], /*add_bos=*/false);
    if (got != want) {
      ++mismatches;
      ADD_FAILURE() << GetParam() << " corpus line " << i + 1 << " " << nlohmann::json(texts[i]).dump() << "\n  got  "
                    << show(got) << "\n  want " << show(want);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_P(RealTokenizer, DecodeMatchesTokenizersWithAndWithoutSpecials) {
  const HfTokenizer& tok = real_tokenizer(GetParam());
  const auto rows = read_jsonl_file(tokenizer_fixture("expected/" + GetParam() + "/decode.jsonl"));
  ASSERT_GT(rows.size(), 100u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<int64_t> ids = rows[i].at("ids").get<std::vector<int64_t>>();
    EXPECT_EQ(tok.decode(ids, SpecialTokens::kKeep), rows[i].at("text").get<std::string>())
        << GetParam() << " decode.jsonl row " << i + 1 << " " << show(ids);
    EXPECT_EQ(tok.decode(ids, SpecialTokens::kSkip), rows[i].at("text_skip").get<std::string>())
        << GetParam() << " decode.jsonl row " << i + 1 << " (skipping specials) " << show(ids);
  }
}

TEST_P(RealTokenizer, EncodeThenDecodeRoundTrips) {
  const HfTokenizer& tok = real_tokenizer(GetParam());
  const std::vector<std::string> texts = corpus();
  // decode.jsonl starts with the decodes of the corpus ids: tokenizers' own round trip.
  const auto rows = read_jsonl_file(tokenizer_fixture("expected/" + GetParam() + "/decode.jsonl"));
  ASSERT_GE(rows.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string back = tok.decode(tok.encode(texts[i], false), SpecialTokens::kKeep);
    EXPECT_EQ(back, rows[i].at("text").get<std::string>()) << GetParam() << " corpus line " << i + 1;
    // Byte-level BPE loses nothing: DeepSeek-V3 (no normalizer) gives the text back exactly.
    if (GetParam() == "deepseek_v3") {
      EXPECT_EQ(back, texts[i]) << "corpus line " << i + 1;
    }
  }
}

TEST_P(RealTokenizer, VocabularySizeMatchesTokenizers) {
  const nlohmann::json versions = nlohmann::json::parse(std::ifstream(tokenizer_fixture("expected/versions.json")));
  EXPECT_EQ(real_tokenizer(GetParam()).vocab_size(), versions.at(GetParam()).at("vocab_with_added").get<int64_t>());
}

INSTANTIATE_TEST_SUITE_P(Hf, RealTokenizer, ::testing::ValuesIn(testing::real_tokenizer_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace moerl::model
