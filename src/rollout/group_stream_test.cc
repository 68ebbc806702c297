// GroupRollout::stream, the streaming worker's engine, with a scripted UnitSource: under
// greedy decoding every unit's record equals the one run() gives for a batch of all units
// (tokens, behaviour logprobs, rewards), whatever order units are fed and end in; a unit whose
// prompt is longer than the rows have room for waits for a second call with room; a version
// the source activates mid-stream shows in the samples' version spans; no work: false.
#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "base/config.h"
#include "model/test_util.h"
#include "model/tokenizer.h"
#include "rollout/group_rollout.h"
#include "tasks/registry.h"
#include "tasks/reward_fn.h"

namespace moerl::rollout {
namespace {

class ScriptedSource final : public UnitSource {
 public:
  explicit ScriptedSource(std::vector<runtime::TaskUnit> units) : units_(units.begin(), units.end()) {}
  std::vector<runtime::TaskUnit> take(int64_t max_units, bool idle) override {
    std::vector<runtime::TaskUnit> out;
    while (!units_.empty() && static_cast<int64_t>(out.size()) < std::min<int64_t>(max_units, per_take)) {
      out.push_back(units_.front());
      units_.pop_front();
    }
    takes.push_back({static_cast<int64_t>(out.size()), idle});
    return out;
  }
  void done(runtime::ExperienceRecord r) override {
    runtime::validate(r);
    records[r.task_id] = std::move(r);
  }
  std::optional<uint64_t> refresh() override {
    if (++refreshes != bump_at) return std::nullopt;
    version_ = 7;  // (a real source loads the weights here; these tests keep them)
    return version_;
  }
  uint64_t version() const override { return version_; }

  int64_t per_take = 1;
  int bump_at = -1;
  int refreshes = 0;
  std::vector<std::pair<int64_t, bool>> takes;  // (units given, idle)
  std::map<std::string, runtime::ExperienceRecord> records;

 private:
  std::deque<runtime::TaskUnit> units_;
  uint64_t version_ = 3;
};

struct Fixture {
  model::Model policy = model::init_random(model::testing::tiny_qwen3(), 51);
  model::CharTokenizer tok;
  std::shared_ptr<const tasks::Task> task;
  std::unique_ptr<tasks::VerifierRewardFn> reward;
  Fixture() {
    ConfigDoc doc = ConfigDoc::parse("[task]\nname = \"addition\"\ndigits = 2\nseed = 4\n", "task.toml");
    ConfigTable tt = doc.root().table("task");
    task = tasks::make_task(tt);
    reward = std::make_unique<tasks::VerifierRewardFn>(task);
  }
  std::vector<runtime::TaskUnit> units(int n, uint32_t group) {
    std::vector<runtime::TaskUnit> out;
    for (int i = 0; i < n; ++i) out.push_back(make_task_unit(task->item(tasks::Split::kTrain, i), tok, group, i + 1));
    return out;
  }
};

RolloutConfig greedy_rows(int64_t rows) {
  RolloutConfig rc{.max_new_tokens = 7, .batch_rows = rows};
  rc.sampling.greedy = true;
  return rc;
}

TEST(GroupStream, GreedyRecordsEqualThoseOfOneBatch) {
  Fixture f;
  std::vector<runtime::TaskUnit> units = f.units(5, 3);
  // An EOS-like stop so answers end at different steps: the refills happen mid-group.
  RolloutConfig rc = greedy_rows(4);
  GroupRollout batch(f.policy, f.tok, *f.reward, rc, "w");
  const std::vector<runtime::ExperienceRecord> want = batch.run(units, 1, 3);
  ScriptedSource src(units);
  GroupRollout streamed(f.policy, f.tok, *f.reward, rc, "w");
  ASSERT_TRUE(streamed.stream(src, 2));
  ASSERT_EQ(src.records.size(), units.size());
  for (const runtime::ExperienceRecord& w : want) {
    const runtime::ExperienceRecord& got = src.records.at(w.task_id);
    EXPECT_EQ(got.cursor, w.cursor);
    ASSERT_EQ(got.samples.size(), w.samples.size());
    for (size_t i = 0; i < w.samples.size(); ++i) {
      EXPECT_EQ(got.samples[i].response_tokens, w.samples[i].response_tokens) << w.task_id << " sample " << i;
      EXPECT_EQ(got.samples[i].reward, w.samples[i].reward);
      EXPECT_EQ(got.samples[i].version_spans, w.samples[i].version_spans);
      ASSERT_EQ(got.samples[i].behaviour_logprobs.size(), w.samples[i].behaviour_logprobs.size());
      for (size_t t = 0; t < w.samples[i].behaviour_logprobs.size(); ++t) {
        EXPECT_NEAR(got.samples[i].behaviour_logprobs[t], w.samples[i].behaviour_logprobs[t], 1e-5);
      }
    }
  }
  // The first take waits for work; the rest are asked between steps and must not.
  ASSERT_GE(src.takes.size(), 2u);
  EXPECT_TRUE(src.takes[0].second);
  for (size_t i = 1; i < src.takes.size(); ++i) EXPECT_FALSE(src.takes[i].second) << "take " << i;
  EXPECT_FALSE(streamed.stream(src, 3)) << "no units: no work";
}

TEST(GroupStream, ALongerPromptWaitsForACallWithRoomAndVersionsAreSpanned) {
  Fixture f;
  std::vector<runtime::TaskUnit> units = f.units(4, 2);
  // Unit 2's prompt is longer than any before it: the first call's rows have no room for it.
  for (int k = 0; k < 9; ++k) units[2].prompt_ids.push_back(units[2].prompt_ids.back());
  ScriptedSource src(units);
  src.bump_at = 2;  // version 7 between the first decode steps
  GroupRollout g(f.policy, f.tok, *f.reward, greedy_rows(2), "w");
  ASSERT_TRUE(g.stream(src, 4));
  ASSERT_EQ(src.records.size(), 4u) << "every unit, the long one in a second call";
  int spanning = 0;
  for (const auto& [id, r] : src.records) {
    for (const runtime::Sample& s : r.samples) {
      ASSERT_FALSE(s.version_spans.empty());
      EXPECT_EQ(s.version_spans.front().start, 0u);
      EXPECT_EQ(s.version_spans.back().version, s.version_spans.size() == 2 ? 7u : s.version_spans.back().version);
      spanning += s.version_spans.size() == 2;
    }
  }
  EXPECT_GT(spanning, 0) << "samples running at the new version record both";
  for (const runtime::Sample& s : src.records.at(units[2].task_id).samples) {
    EXPECT_EQ(s.version_spans, (std::vector<runtime::VersionSpan>{{0, 7}})) << "started after version 7";
  }
}

TEST(GroupStream, NeedsRows) {
  Fixture f;
  ScriptedSource src(f.units(1, 2));
  GroupRollout g(f.policy, f.tok, *f.reward, greedy_rows(0), "w");
  try {
    g.stream(src, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch_rows > 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moerl::rollout
