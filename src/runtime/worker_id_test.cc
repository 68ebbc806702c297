// Worker ids: sanitised, bounded, random per start; hand-given ids checked.
#include "runtime/worker_id.h"

#include <gtest/gtest.h>

#include <set>

#include "base/error.h"

namespace moerl::runtime {
namespace {

TEST(WorkerId, PodNamePlusSuffixSanitised) {
  EXPECT_EQ(make_worker_id("moerl-rollout-7d9f-x2k4p", "3fa91c"), "moerl-rollout-7d9f-x2k4p-3fa91c");
  EXPECT_EQ(make_worker_id("ip-10-0-1-7.ec2.internal", "00ff00"), "ip-10-0-1-7.ec2.internal-00ff00");
  EXPECT_EQ(make_worker_id("a/b c:d", "abc123"), "a-b-c-d-abc123");
  EXPECT_EQ(make_worker_id("../etc", "abc123"), "etc-abc123");
  EXPECT_EQ(make_worker_id("", "abc123"), "worker-abc123");
  EXPECT_EQ(make_worker_id("///", "abc123"), "worker-abc123");
  std::string id = make_worker_id(std::string(300, 'p'), "abc123");
  EXPECT_EQ(id.size(), kMaxWorkerIdChars);
  EXPECT_EQ(id.substr(id.size() - 7), "-abc123");
  EXPECT_NO_THROW(check_worker_id(id));
}

TEST(WorkerId, SuffixIsSixHexAndDiffersPerCall) {
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    std::string s = random_worker_suffix();
    ASSERT_EQ(s.size(), 6u) << s;
    EXPECT_EQ(s.find_first_not_of("0123456789abcdef"), std::string::npos) << s;
    seen.insert(s);
  }
  // 50 draws from 2^24: a repeat has probability ~7e-5.
  EXPECT_GE(seen.size(), 49u);
  EXPECT_NE(default_worker_id(), default_worker_id());
  EXPECT_NO_THROW(check_worker_id(default_worker_id()));
}

TEST(WorkerId, HandGivenIdsChecked) {
  EXPECT_NO_THROW(check_worker_id("w0-3"));
  EXPECT_NO_THROW(check_worker_id("pod_3.a"));
  for (const char* bad : {"", "a/b", "a b", "__handback__", ".", "..", "x\n"}) {
    try {
      check_worker_id(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--worker-id '" + std::string(bad) + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("HINT"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(check_worker_id(std::string(kMaxWorkerIdChars + 1, 'a')), Error);
}

}  // namespace
}  // namespace moerl::runtime
