#include "runtime/lineage.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace moerl::runtime {
namespace {

ExperienceRecord at_versions(std::vector<uint64_t> versions) {
  ExperienceRecord r;
  for (uint64_t v : versions) {
    Sample s;
    s.version_spans = {{0, v}};
    r.samples.push_back(s);
  }
  return r;
}

TEST(VersionLineage, ResumedLifeOwnsItsCheckpointsVersionsAndItsOwnButNotTheLostOnes) {
  // Life 1 checkpointed at version 4 and published 5 and 6 before it died; life 2 resumed
  // from the checkpoint and published 7 first.
  VersionLineage l = VersionLineage::from_json(nlohmann::json::array({{0, 4}}), 4);
  l.begin(7);
  for (uint64_t v : {0, 3, 4, 7, 8, 100}) EXPECT_TRUE(l.contains(v)) << v;
  for (uint64_t v : {5, 6}) EXPECT_FALSE(l.contains(v)) << v;
  EXPECT_EQ(l.foreign_version(at_versions({4, 7})), std::nullopt);
  EXPECT_EQ(l.foreign_version(at_versions({8, 6, 5})), 5u);
  EXPECT_EQ(l.describe(), "0-4, 7-");
  // The next checkpoint closes this life's range at its version.
  EXPECT_EQ(l.to_json(9), nlohmann::json::parse("[[0,4],[7,9]]"));
  VersionLineage again = VersionLineage::from_json(l.to_json(9), 9);
  again.begin(12);
  EXPECT_FALSE(again.contains(10));
  EXPECT_TRUE(again.contains(9));
}

TEST(VersionLineage, WithoutACheckpointNothingBeforeThisLifeIsOurs) {
  VersionLineage l;
  EXPECT_FALSE(l.contains(0));
  l.begin(4);
  EXPECT_EQ(l.foreign_version(at_versions({0, 3})), 0u);
  EXPECT_TRUE(l.contains(4));
  EXPECT_EQ(l.to_json(3), nlohmann::json::array());  // nothing published yet at version 3
}

TEST(VersionLineage, CheckpointOfAnOlderBuildTrustsItsVersionsAndBadOnesAreErrors) {
  VersionLineage l = VersionLineage::from_json(nullptr, 6);
  EXPECT_TRUE(l.contains(6));
  EXPECT_FALSE(l.contains(7));
  for (const char* bad : {"{}", "[[3]]", "[[4,2]]", "[[0,4],[3,6]]", "[[-1,2]]"}) {
    EXPECT_THROW(VersionLineage::from_json(nlohmann::json::parse(bad), 6), Error) << bad;
  }
  EXPECT_THROW(l.begin(5), Error);  // inside the saved range: versions are never reused
  l.begin(6);                       // the checkpoint's own version, republished
}

}  // namespace
}  // namespace moerl::runtime
