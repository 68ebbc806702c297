// The keys that size the multi-rank roles: [ep] size (a trainer group), [rollout] ep_size (a
// rollout instance) and [ep] timeout_seconds; sizes that cannot shard the experts, and an
// instance size in a sync job, are refused naming the key; dynamic sampling goes with a
// trainer group in async mode (the controller filters before the group sees a batch).
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "job/job_config.h"

namespace moerl::job {
namespace {

JobConfig parse(const std::vector<std::string>& overrides) {
  const std::string text =
      "[model]\nnum_experts = 8\n[task]\nname = \"addition\"\ndigits = 1\n[algorithm]\ngroup_size = 4\n";
  return JobConfig::parse(ConfigDoc::parse(text, "groups.toml", overrides));
}

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    parse(overrides);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JobConfigGroups, DefaultsAreOneProcessPerRole) {
  JobConfig j = parse({});
  EXPECT_EQ(j.ep_size, 1);
  EXPECT_EQ(j.rollout.ep_size, 1);
  EXPECT_EQ(j.ep_timeout_seconds, 300);
}

TEST(JobConfigGroups, SizesOfBothRolesAreRead) {
  JobConfig j = parse({"runtime.mode=\"async\"", "ep.size=4", "rollout.ep_size=2", "ep.timeout_seconds=45"});
  EXPECT_EQ(j.ep_size, 4);
  EXPECT_EQ(j.rollout.ep_size, 2);
  EXPECT_EQ(j.ep_timeout_seconds, 45);
}

TEST(JobConfigGroups, SizesThatCannotShardTheExpertsAreRefused) {
  EXPECT_NE(error_of({"runtime.mode=\"async\"", "rollout.ep_size=3"}).find("rollout.ep_size=3 must divide model.num_experts=8"),
            std::string::npos);
  EXPECT_NE(error_of({"ep.size=3"}).find("ep.size=3 must divide model.num_experts=8"), std::string::npos);
  EXPECT_NE(error_of({"ep.timeout_seconds=0"}).find("timeout_seconds"), std::string::npos);
}

TEST(JobConfigGroups, AnInstanceSizeInASyncJobIsRefused) {
  const std::string e = error_of({"rollout.ep_size=2"});
  EXPECT_NE(e.find("rollout.ep_size=2"), std::string::npos) << e;
  EXPECT_NE(e.find("runtime.mode"), std::string::npos) << e;
}

TEST(JobConfigGroups, HierarchicalBackendAndItsHopsAreRead) {
  JobConfig j = parse({"ep.backend=\"hierarchical\"", "ep.intra_backend=\"fabric\"", "ep.inter_backend=\"alltoall\""});
  EXPECT_EQ(j.ep_backend, "hierarchical");
  EXPECT_EQ(j.ep_intra_backend, "fabric");
  EXPECT_EQ(j.ep_inter_backend, "alltoall");
  j = parse({"ep.backend=\"hierarchical\""});
  EXPECT_EQ(j.ep_intra_backend, "");  // auto
  EXPECT_EQ(j.ep_inter_backend, "fabric");
  std::string e = error_of({"ep.backend=\"fabric\"", "ep.intra_backend=\"fabric\""});
  EXPECT_NE(e.find("ep.intra_backend is set but ep.backend = \"fabric\""), std::string::npos) << e;
  e = error_of({"ep.backend=\"hierarchical\"", "ep.inter_backend=\"loopback\""});
  EXPECT_NE(e.find("inter_backend"), std::string::npos) << e;
  EXPECT_NE(e.find("loopback"), std::string::npos) << e;
}

TEST(JobConfigGroups, ContinuousBatchingIsReadAndRefusedUnderEpLockstep) {
  EXPECT_EQ(parse({"rollout.batch_rows=32"}).rollout.gen.batch_rows, 32);
  EXPECT_EQ(parse({"runtime.mode=\"async\"", "ep.size=2", "rollout.batch_rows=32"}).rollout.gen.batch_rows, 32);
  std::string e = error_of({"runtime.mode=\"async\"", "rollout.ep_size=2", "rollout.batch_rows=32"});
  EXPECT_NE(e.find("rollout.batch_rows=32 (continuous batching) with rollout ranks in expert-parallel lockstep (rollout.ep_size=2)"),
            std::string::npos) << e;
  e = error_of({"ep.size=2", "rollout.batch_rows=8"});
  EXPECT_NE(e.find("(ep.size=2)"), std::string::npos) << e;
  EXPECT_NE(error_of({"rollout.batch_rows=-1"}).find("rollout.batch_rows"), std::string::npos);
}

TEST(JobConfigGroups, PrefillTokenBudgetIsReadAndChecked) {
  EXPECT_EQ(parse({}).rollout.gen.prefill_tokens, 16384);
  EXPECT_EQ(parse({"rollout.prefill_tokens=4096"}).rollout.gen.prefill_tokens, 4096);
  EXPECT_EQ(parse({"rollout.prefill_tokens=0"}).rollout.gen.prefill_tokens, 0);  // one forward
  EXPECT_NE(error_of({"rollout.prefill_tokens=-1"}).find("rollout.prefill_tokens"), std::string::npos);
}

TEST(JobConfigGroups, StreamingIsForOneRankAsyncWorkersWithRows) {
  EXPECT_FALSE(parse({}).rollout.gen.streaming);
  EXPECT_TRUE(parse({"runtime.mode=\"async\"", "rollout.streaming=true", "rollout.batch_rows=16"}).rollout.gen.streaming);
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"rollout.streaming=true", "rollout.batch_rows=16"},
           {"runtime.mode=\"async\"", "rollout.streaming=true"},
           {"runtime.mode=\"async\"", "rollout.streaming=true", "rollout.ep_size=2"}}) {
    const std::string e = error_of(bad);
    EXPECT_NE(e.find("rollout.streaming = true needs runtime.mode = \"async\", rollout.ep_size = 1 and "
                     "rollout.batch_rows > 0"),
              std::string::npos)
        << e;
  }
}

TEST(JobConfigGroups, DynamicSamplingGoesWithATrainerGroupOnlyInAsyncMode) {
  EXPECT_NO_THROW(parse({"runtime.mode=\"async\"", "ep.size=2", "rollout.dynamic_sampling=true"}));
  EXPECT_NE(error_of({"ep.size=2", "rollout.dynamic_sampling=true"}).find("runtime.mode = \"sync\""),
            std::string::npos);
}

}  // namespace
}  // namespace moerl::job
