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
  EXPECT_EQ(training_gpus_per_node(infra), 8);
  EXPECT_EQ(training_gpus_total(infra), 16);
  EXPECT_EQ(infra.training.efa_interfaces, 16);
  EXPECT_EQ(infra.training.availability_zones, std::vector<std::string>{"us-east-2b"});
  EXPECT_EQ(std::string(infra.rollout.smallest.name), "g6.12xlarge");  // fewest GPUs, then least memory
  AppView app = parse_app_view(small_app(), "app.toml");
  EXPECT_EQ(app.ep_size, 16);
  EXPECT_EQ(app.rollout_ep_size, 2);
  EXPECT_EQ(app.num_experts, 64);
  EXPECT_EQ(parse_app_view("[rollout]\nnum_workers = 2\n", "app.toml").rollout_ep_size, 1);  // the default
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

std::string training_nodes(int n) { return replace_once(small_infra(), "count = 2 ", "count = " + std::to_string(n) + " "); }
std::string ep_size(int n) { return replace_once(small_app(), "\nsize = 16 ", "\nsize = " + std::to_string(n) + " "); }

// The trainer is ONE group with a rank on every GPU of the training nodes: ep.size must be
// nodes x GPUs per node; the error gives both numbers and the fix.
TEST(Infra, EpSizeMustEqualTheTrainingNodesGpus) {
  const std::string err = check(small_infra(), ep_size(8));
  EXPECT_NE(err.find("node_groups.training.count = 2 nodes x 8 GPUs (p5en.48xlarge) = 16 trainer ranks, but APP "
                     "ep.size = 8"), std::string::npos) << err;
  EXPECT_NE(err.find("HINT: set APP [ep] size = 16, or node_groups.training.count = 1"), std::string::npos) << err;
  expect_error(small_infra(), ep_size(4), "node_groups.training.count", "set APP [ep] size = 16 (EP sub-groups");
  expect_error(small_infra(), ep_size(32), "node_groups.training.count", "or node_groups.training.count = 4");
  // The same shapes, consistent: one node of 8, four nodes of 8.
  EXPECT_EQ(check(training_nodes(1), ep_size(8)), "");
  EXPECT_EQ(check(training_nodes(4), ep_size(32)), "");
  expect_error(replace_once(small_infra(), "efa_interfaces = 16", "efa_interfaces = 0"), small_app(),
               "node_groups.training.efa_interfaces", "spans 2 nodes");
}

// ep.size and rollout.ep_size shard model.num_experts; the backend must carry the group.
TEST(Infra, EpSizesAgainstTheExpertsAndTheBackend) {
  expect_error(training_nodes(3), ep_size(24), "ep.size", "= 24 does not divide model.num_experts = 64");
  expect_error(small_infra(), replace_once(small_app(), "backend = \"nccl\"", "backend = \"loopback\""), "ep.backend",
               "runs one rank, but ep.size = 16");
  std::string no_backend = replace_once(small_app(), "backend = \"nccl\"", "# no backend: loopback");
  expect_error(training_nodes(1), replace_once(no_backend, "\nsize = 16 ", "\nsize = 8 "), "ep.backend", "ep.size = 8");
  expect_error(small_infra(), replace_once(small_app(), "backend = \"nccl\"", "backend = \"cuda_ipc\""), "ep.backend",
               "stays within one node, but the trainer group spans 2 nodes");
  EXPECT_EQ(check(training_nodes(1), replace_once(ep_size(8), "backend = \"nccl\"", "backend = \"cuda_ipc\"")), "");
}

// A rollout pod is one instance of rollout.ep_size GPUs: it must divide the GPUs of every
// rollout instance type, and it is the only source of a rollout pod's GPU count.
TEST(Infra, RolloutEpSizeMustDivideTheRolloutNodesGpus) {
  const std::string err = check(small_infra(), replace_once(small_app(), "ep_size = 2 ", "ep_size = 8 "));
  EXPECT_NE(err.find("node_groups.rollout.instance_types has g6e.12xlarge with 4 GPUs, which APP rollout.ep_size = 8 "
                     "does not divide"), std::string::npos) << err;
  EXPECT_NE(err.find("HINT: set APP rollout.ep_size to a divisor of 4"), std::string::npos) << err;
  expect_error(small_infra(), replace_once(small_app(), "ep_size = 2 ", "ep_size = 3 "), "rollout.ep_size",
               "= 3 does not divide model.num_experts = 64");
  // 4-GPU instances: one per node, so 4 nodes hold 4, not 8.
  expect_error(small_infra(), replace_once(small_app(), "ep_size = 2 ", "ep_size = 4 "), "node_groups.rollout.max",
               "hold 4 rollout instances of 4 GPU(s), but APP rollout.num_workers = 8");
  EXPECT_EQ(check(small_infra(), replace_once(replace_once(small_app(), "ep_size = 2 ", "ep_size = 4 "),
                                              "num_workers = 8 ", "num_workers = 4 ")), "");
  expect_error(replace_once(small_infra(), "grace_seconds = 90", "grace_seconds = 90\ngpus_per_worker = 4"), small_app(),
               "rollout.gpus_per_worker", "no longer read: a rollout pod is one instance of APP rollout.ep_size GPUs");
}

// Shared-memory weight versions reach only workers on the trainer's host; the cluster's
// rollout pods would never load one.
TEST(Infra, SharedMemoryWeightsAreRefusedForTheCluster) {
  expect_error(small_infra(), replace_once(small_app(), "[runtime]\n", "[runtime]\nweight_transport = \"shared\"\n"),
               "runtime.weight_transport", "reaches only rollout workers on the trainer's host");
  EXPECT_EQ(check(small_infra(), replace_once(small_app(), "[runtime]\n", "[runtime]\nweight_transport = \"store\"\n")),
            "");
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
  expect_error(replace_once(small_infra(), "count = 2 ", "count = 2\ninstnce_count = 3 "), small_app(),
               "node_groups.training", "unknown key(s)");
  expect_error(replace_once(small_infra(), "capacity = \"on-demand\"\nefa", "capacity = \"spot\"\nefa"), small_app(),
               "node_groups.training.capacity", "\"spot\" is not accepted");
  expect_error(replace_once(small_infra(), "capacity = \"on-demand\"\nefa", "capacity = \"capacity-block\"\nefa"),
               small_app(), "node_groups.training.capacity_reservation_id", "not a capacity reservation id");
  expect_error(replace_once(small_infra(), "launcher = \"pytorchjob\"", "launcher = \"mpijob\""), small_app(),
               "trainer.launcher", "not accepted");
}

TEST(Infra, TooManyRolloutWorkersForTheGroup) {
  expect_error(small_infra(), replace_once(small_app(), "num_workers = 8", "num_workers = 9"), "node_groups.rollout.max",
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
