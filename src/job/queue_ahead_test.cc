// The async trainer's queue depth (job/queue_ahead.h): the old rule without streaming, the
// staleness-bounded deeper queue for streaming workers, and an explicit runtime.queue_ahead.
#include "job/queue_ahead.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace moerl::job {
namespace {

// An async job with P prompts per step; `runtime` adds [runtime] keys, `rollout` [rollout] keys.
JobConfig parse(int64_t P, const std::string& runtime, const std::string& rollout = "") {
  const std::string text = "[task]\nname = \"addition\"\ndigits = 1\n[rollout]\nprompts_per_step = " +
                           std::to_string(P) + "\n" + rollout + "[runtime]\nmode = \"async\"\n" + runtime;
  return JobConfig::parse(ConfigDoc::parse(text, "queue_ahead.toml"));
}

const std::string kStreaming = "streaming = true\nbatch_rows = 256\nnum_workers = 1\n";

TEST(QueueAhead, WithoutStreamingItIsTheLargerOfOneStepAndTheWorkersLeases) {
  struct Case {
    int64_t P, tasks_per_lease, num_workers;
  };
  for (const Case c : {Case{16, 1, 2}, Case{16, 32, 1}, Case{16, 16, 3}, Case{4, 2, 2}}) {
    const JobConfig cfg = parse(c.P, "tasks_per_lease = " + std::to_string(c.tasks_per_lease) + "\nmax_staleness = 6\n",
                                "num_workers = " + std::to_string(c.num_workers) + "\n");
    const QueueAhead q = queue_ahead(cfg);
    EXPECT_EQ(q.tasks, std::max(c.P, c.tasks_per_lease * c.num_workers)) << q.why;
    EXPECT_TRUE(q.warning.empty()) << q.warning;
  }
}

// The measured case (docs/perf.md): P = 16, S = 6 keeps 80 ahead; the old rule gave 16.
TEST(QueueAhead, StreamingWorkersQueuePromptsPerStepTimesStalenessMinusOne) {
  const QueueAhead q = queue_ahead(parse(16, "tasks_per_lease = 16\nmax_staleness = 6\n", kStreaming));
  EXPECT_EQ(q.tasks, 80);
  EXPECT_NE(q.why.find("prompts_per_step 16 x (max_staleness 6 - 1)"), std::string::npos) << q.why;
  EXPECT_TRUE(q.warning.empty()) << q.warning;
  EXPECT_EQ(queue_ahead(parse(8, "max_staleness = 3\n", kStreaming)).tasks, 16);
}

TEST(QueueAhead, StreamingWithNoStalenessRoomKeepsTheBase) {
  EXPECT_EQ(queue_ahead(parse(16, "max_staleness = 1\n", kStreaming)).tasks, 16);
  EXPECT_EQ(queue_ahead(parse(16, "max_staleness = 0\n", kStreaming)).tasks, 16);
  EXPECT_EQ(queue_ahead(parse(16, "tasks_per_lease = 32\nmax_staleness = 1\n", kStreaming)).tasks, 32);
  // Leases deeper than the staleness rule still win: the workers must have their tasks.
  EXPECT_EQ(queue_ahead(parse(16, "tasks_per_lease = 128\nmax_staleness = 6\n", kStreaming)).tasks, 128);
}

TEST(QueueAhead, AnExplicitValueWinsAndWarnsPastTheStalenessBudget) {
  EXPECT_EQ(queue_ahead(parse(16, "queue_ahead = 24\nmax_staleness = 6\n", kStreaming)).tasks, 24);
  EXPECT_EQ(queue_ahead(parse(16, "queue_ahead = 3\ntasks_per_lease = 32\n")).tasks, 3);
  const QueueAhead within = queue_ahead(parse(16, "queue_ahead = 96\nmax_staleness = 6\n", kStreaming));
  EXPECT_EQ(within.tasks, 96);
  EXPECT_TRUE(within.warning.empty()) << within.warning;
  // 16 x 6 = 96 is the budget: 97 is accepted, with a warning naming both keys.
  const QueueAhead past = queue_ahead(parse(16, "queue_ahead = 97\nmax_staleness = 6\n", kStreaming));
  EXPECT_EQ(past.tasks, 97);
  EXPECT_NE(past.warning.find("runtime.queue_ahead = 97"), std::string::npos) << past.warning;
  EXPECT_NE(past.warning.find("max_staleness"), std::string::npos) << past.warning;
  EXPECT_NE(past.warning.find("dropped"), std::string::npos) << past.warning;
}

// The controller scales the depth itself with dynamic sampling; the log says so.
TEST(QueueAhead, DynamicSamplingIsNamedNotApplied) {
  const QueueAhead q = queue_ahead(parse(16, "max_staleness = 6\n", kStreaming + "dynamic_sampling = true\n"));
  EXPECT_EQ(q.tasks, 80);
  EXPECT_NE(q.why.find("max_sampling_rounds 4"), std::string::npos) << q.why;
}

}  // namespace
}  // namespace moerl::job
