// INFRA.toml validation: each invalid case gives an error naming the field.
#include "deploy/infra.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "deploy/render.h"
#include "deploy/test_util.h"

namespace moerl::deploy {
namespace {

using testing::example;
using testing::read_file;
using testing::replace_once;

std::string small_infra() { return read_file(example("small", "infra.toml")); }
std::string small_app() { return read_file(example("small", "app.toml")); }

// Loads and validates; returns the error text ("" when valid).
std::string check(const std::string& infra_text, const std::string& app_text) {
  try {
    InfraConfig infra = parse_infra(infra_text, "infra.toml");
    AppView app = parse_app_view(app_text, "app.toml");
    validate_infra(infra, app);
    return "";
  } catch (const Error& e) {
    return std::string(e.what());
  }
}

void expect_error(const std::string& infra_text, const std::string& app_text, const std::string& field,
                  const std::string& words) {
  std::string err = check(infra_text, app_text);
  ASSERT_FALSE(err.empty()) << "expected an error naming " << field;
  EXPECT_NE(err.find(field), std::string::npos) << err;
  EXPECT_NE(err.find(words), std::string::npos) << err;
  EXPECT_NE(err.find("HINT"), std::string::npos) << err;
}

TEST(InstanceTypes, PublicFactsOfTheEfaInstances) {
  const InstanceType* p5en = find_instance_type("p5en.48xlarge");
  ASSERT_NE(p5en, nullptr);
  EXPECT_EQ(p5en->gpus, 8);
  EXPECT_EQ(p5en->efa_interfaces, 16);
  EXPECT_EQ(find_instance_type("p5.48xlarge")->efa_interfaces, 32);
  EXPECT_EQ(find_instance_type("p5e.48xlarge")->efa_interfaces, 32);
  EXPECT_EQ(find_instance_type("p4d.24xlarge")->efa_interfaces, 4);
  EXPECT_EQ(find_instance_type("p6-b200.48xlarge")->efa_interfaces, 8);
  EXPECT_EQ(find_instance_type("r7i.8xlarge")->gpus, 0);
  EXPECT_EQ(find_instance_type("p9.mega"), nullptr);
}

TEST(Infra, ExamplesAreValid) {
  EXPECT_EQ(check(small_infra(), small_app()), "");
  EXPECT_EQ(check(read_file(example("reference-48", "infra.toml")), read_file(example("reference-48", "app.toml"))), "");
}

TEST(Infra, DerivedSizes) {
  InfraConfig infra = parse_infra(small_infra(), "infra.toml");
  EXPECT_EQ(training_gpus_total(infra), 8);
  EXPECT_EQ(infra.training.efa_interfaces, 16);
  EXPECT_EQ(infra.training.availability_zones, std::vector<std::string>{"us-east-2b"});
  EXPECT_EQ(std::string(infra.rollout.smallest.name), "g6.12xlarge");  // fewest GPUs, then least memory
  EXPECT_EQ(rollout_gpus_per_worker(infra), 4);
}

TEST(Infra, UnknownInstanceType) {
  expect_error(replace_once(small_infra(), "instance_type = \"p5en.48xlarge\"", "instance_type = \"p9.mega\""),
               small_app(), "node_groups.training.instance_type", "not a known instance type");
  expect_error(replace_once(small_infra(), "\"g5.12xlarge\"", "\"g5.huge\""), small_app(),
               "node_groups.rollout.instance_types", "g5.huge");
}

TEST(Infra, EfaOnAnInstanceWithoutIt) {
  std::string infra = replace_once(small_infra(), "instance_type = \"p5en.48xlarge\"", "instance_type = \"g6e.4xlarge\"");
  expect_error(infra, small_app(), "node_groups.training.efa_interfaces", "g6e.4xlarge has no EFA");
  expect_error(replace_once(small_infra(), "efa_interfaces = 16", "efa_interfaces = 32"), small_app(),
               "node_groups.training.efa_interfaces", "exceeds the 16 EFA interfaces");
}

TEST(Infra, GpuCountsThatDoNotDivideTheEpSize) {
  expect_error(small_infra(), replace_once(small_app(), "size = 8", "size = 6"), "node_groups.training.count",
               "ep.size = 6");
  expect_error(small_infra(), replace_once(small_app(), "size = 8", "size = 32"), "node_groups.training.count",
               "8 GPUs does not divide");
  EXPECT_EQ(check(small_infra(), replace_once(small_app(), "size = 8", "size = 4")), "");
  std::string two_nodes = replace_once(small_infra(), "count = 1\ncapacity", "count = 2\ncapacity");
  std::string no_efa = replace_once(two_nodes, "efa_interfaces = 16", "efa_interfaces = 0");
  expect_error(no_efa, replace_once(small_app(), "size = 8", "size = 16"), "node_groups.training.efa_interfaces",
               "spans 2 nodes");
}

// The trainer role is one process: a training group of several nodes would start that many
// independent trainers on one queue and lineage, whatever ep.size says (#17 item 3).
TEST(Infra, SeveralTrainingNodesAreRefused) {
  std::string two_nodes = replace_once(small_infra(), "count = 1\ncapacity", "count = 2\ncapacity");
  for (const char* ep : {"size = 8", "size = 16"}) {
    expect_error(two_nodes, replace_once(small_app(), "size = 8", ep), "node_groups.training.count",
                 "2 nodes would start 2 independent trainers");
  }
  expect_error(two_nodes, small_app(), "node_groups.training.count", "set node_groups.training.count = 1");
}

TEST(Infra, MissingOrMismatchedBucket) {
  expect_error(replace_once(small_infra(), "bucket = \"moerl-example-artifacts\"\n", ""), small_app(), "s3.bucket",
               "is missing");
  expect_error(replace_once(small_infra(), "bucket = \"moerl-example-artifacts\"", "bucket = \"other-bucket\""),
               small_app(), "s3.bucket", "uses bucket \"moerl-example-artifacts\"");
  std::string local = replace_once(small_app(), "uri = \"s3://moerl-example-artifacts/runs/small\"", "uri = \"./runs\"");
  expect_error(small_infra(), local, "store.uri", "not an s3:// URI");
}

TEST(Infra, EfaNodeGroupSpanningTwoZones) {
  std::string infra = replace_once(small_infra(), "capacity = \"on-demand\"\n",
                                   "capacity = \"on-demand\"\navailability_zones = [\"us-east-2a\", \"us-east-2b\"]\n");
  expect_error(infra, small_app(), "node_groups.training.availability_zones", "exactly one availability zone");
}

TEST(Infra, SpotGracePeriodInsideTheNotice) {
  expect_error(replace_once(small_infra(), "grace_seconds = 90", "grace_seconds = 150"), small_app(),
               "rollout.grace_seconds", "two-minute Spot notice");
}

TEST(Infra, UnknownKeysAndBadChoicesAreRejected) {
  expect_error(replace_once(small_infra(), "count = 1\ncapacity", "count = 1\ninstnce_count = 3\ncapacity"), small_app(),
               "node_groups.training", "unknown key(s)");
  expect_error(replace_once(small_infra(), "capacity = \"on-demand\"\nefa", "capacity = \"spot\"\nefa"), small_app(),
               "node_groups.training.capacity", "\"spot\" is not accepted");
  expect_error(replace_once(small_infra(), "capacity = \"on-demand\"\nefa", "capacity = \"capacity-block\"\nefa"),
               small_app(), "node_groups.training.capacity_reservation_id", "not a capacity reservation id");
  expect_error(replace_once(small_infra(), "launcher = \"pytorchjob\"", "launcher = \"mpijob\""), small_app(),
               "trainer.launcher", "not accepted");
}

TEST(Infra, TooManyRolloutWorkersForTheGroup) {
  expect_error(small_infra(), replace_once(small_app(), "num_workers = 4", "num_workers = 9"), "node_groups.rollout.max",
               "rollout.num_workers = 9");
}

TEST(Infra, RoleArnAndNamespace) {
  expect_error(replace_once(small_infra(), "role/moerl-small-job", "user/moerl"), small_app(), "iam.role_arn",
               "not an IAM role ARN");
  expect_error(replace_once(small_infra(), "namespace = \"moerl-small\"", "namespace = \"Moerl_Small\""), small_app(),
               "cluster.namespace", "DNS-1123");
}

TEST(Infra, RenderRefusesInvalidInput) {
  InfraConfig infra = parse_infra(replace_once(small_infra(), "grace_seconds = 90", "grace_seconds = 121"), "infra.toml");
  AppView app = parse_app_view(small_app(), "app.toml");
  EXPECT_THROW(render(infra, app, {}), Error);
}

}  // namespace
}  // namespace moerl::deploy
