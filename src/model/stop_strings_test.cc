// Stop strings: the row ends at the token that completes a string (kept in the response), on
// the character tokenizer and through generate()'s GenerateConfig::stop hook.
#include <gtest/gtest.h>

#include "base/error.h"
#include "model/generate.h"
#include "model/stop_strings.h"
#include "model/test_util.h"

namespace moerl::model {
namespace {

// The prefixes of `text`'s tokens at which ends_row is true (as token counts).
std::vector<size_t> stops_in(const StopStrings& stops, const Tokenizer& tok, const std::string& text) {
  const std::vector<int64_t> ids = tok.encode(text, /*add_bos=*/false);
  std::vector<size_t> at;
  for (size_t n = 1; n <= ids.size(); ++n) {
    if (stops.ends_row({ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n)})) at.push_back(n);
  }
  return at;
}

TEST(StopStrings, EndsARowAtTheTokenThatCompletesAString) {
  CharTokenizer tok;
  StopStrings stops(tok, {"</a>", "STOP"});
  EXPECT_EQ(stops_in(stops, tok, "x = 4</a> more"), std::vector<size_t>{9});   // at '>'
  EXPECT_EQ(stops_in(stops, tok, "no stop here </ a>"), std::vector<size_t>{});
  EXPECT_EQ(stops_in(stops, tok, "STOP"), std::vector<size_t>{4});              // the whole answer
  // Each occurrence is reported once, at its end (a long prefix past the window still works).
  EXPECT_EQ(stops_in(stops, tok, std::string(50, 'z') + "</a>zz</a>"), (std::vector<size_t>{54, 60}));
  EXPECT_FALSE(StopStrings(tok, {}).ends_row(tok.encode("</a>", false)));
  EXPECT_FALSE(static_cast<bool>(StopStrings(tok, {}).hook()));
}

TEST(StopStrings, AnEmptyStringIsAnError) {
  CharTokenizer tok;
  try {
    StopStrings(tok, {"</a>", ""});
    ADD_FAILURE() << "an empty stop string was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stop string 1 is empty"), std::string::npos) << e.what();
  }
}

// generate() ends a row where the hook first says so (FinishReason::kStop), keeping the same
// tokens the unstopped run sampled up to there; rows the hook never stops run on.
TEST(GenerateStop, RowsEndWhereTheHookFirstSaysSo) {
  Model m = init_random(testing::tiny_qwen3(true), 31);
  GenerateConfig gc{.max_new_tokens = 10, .seed = 5};
  const std::vector<std::vector<int64_t>> prompts = {{1, 7, 9}, {1, 4}, {1, 3, 3, 3}};
  const std::vector<Generation> free_run = generate(m, prompts, gc);
  // Stop a row once it holds 4 tokens whose last equals that row's 4th free-run token; row 2
  // is never stopped (its marker is a token id the model cannot produce).
  const std::vector<int64_t> marker = {free_run[0].tokens[3], free_run[1].tokens[3], -7};
  gc.stop = [&](const std::vector<int64_t>& toks) {
    for (size_t r = 0; r < marker.size(); ++r) {
      if (toks.size() == 4 && toks.back() == marker[r] &&
          std::equal(toks.begin(), toks.end(), free_run[r].tokens.begin())) {
        return true;
      }
    }
    return false;
  };
  const std::vector<Generation> stopped = generate(m, prompts, gc);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(stopped[r].finish, FinishReason::kStop) << "row " << r;
    EXPECT_EQ(stopped[r].tokens, std::vector<int64_t>(free_run[r].tokens.begin(), free_run[r].tokens.begin() + 4));
    EXPECT_EQ(stopped[r].logprobs.size(), 4u);
  }
  EXPECT_EQ(stopped[2].finish, FinishReason::kLength);
  EXPECT_EQ(stopped[2].tokens, free_run[2].tokens);
  EXPECT_STREQ(finish_reason_name(FinishReason::kStop), "stop");
}

}  // namespace
}  // namespace moerl::model
