// Rendered objects: the properties the issue asks for, checked on the JSON the renderer
// builds (the node validator then checks the YAML files against the schemas).
#include "deploy/render.h"

#include <gtest/gtest.h>

#include "base/files.h"
#include "deploy/pod_spec.h"
#include "deploy/test_util.h"

namespace moerl::deploy {
namespace {

using testing::example;
using testing::read_file;
using testing::replace_once;

struct Job {
  InfraConfig infra;
  AppView app;
};

Job load(const std::string& name, const std::string& infra_patch_from = "", const std::string& infra_patch_to = "") {
  std::string infra = read_file(example(name, "infra.toml"));
  if (!infra_patch_from.empty()) infra = replace_once(infra, infra_patch_from, infra_patch_to);
  Job j{parse_infra(infra, "infra.toml"), parse_app_view(read_file(example(name, "app.toml")), example(name, "app.toml"))};
  validate_infra(j.infra, j.app);
  return j;
}

const Json& trainer_pod(const std::vector<Json>& objs) {
  const Json& job = objs.back();
  if (job["kind"] == "PyTorchJob") return job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"];
  if (job["kind"] == "JobSet") return job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"];
  return job["spec"]["template"]["spec"];
}

TEST(Render, TrainerGangOnOnDemandEfaNodes) {
  Job j = load("small");
  auto objs = render_trainer(j.infra, j.app);
  ASSERT_EQ(objs.size(), 1u);
  EXPECT_EQ(objs[0]["kind"], "PyTorchJob");
  EXPECT_EQ(objs[0]["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"], 1);
  EXPECT_EQ(objs[0]["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"], 1);  // 2 nodes = master + 1 worker
  const Json& pod = trainer_pod(objs);
  const Json& c = pod["containers"][0];
  EXPECT_EQ(c["name"], "pytorch");
  EXPECT_EQ(c["resources"]["requests"], c["resources"]["limits"]);
  EXPECT_EQ(c["resources"]["limits"]["vpc.amazonaws.com/efa"], "16");
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "8");
  EXPECT_EQ(c["resources"]["limits"]["hugepages-2Mi"], "5120Mi");
  EXPECT_EQ(c["command"][3], "moerl");
  EXPECT_EQ(c["command"][4], "trainer");
  EXPECT_EQ(c["command"][5], kAppPath);
  EXPECT_EQ(pod["nodeSelector"][kNodeGroupLabel], "training");
  const Json& expr = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0];
  EXPECT_EQ(expr["key"], "eks.amazonaws.com/capacityType");
  EXPECT_EQ(expr["values"], Json::array({"ON_DEMAND", "CAPACITY_BLOCK"}));
  bool shm = false;
  for (const auto& v : pod["volumes"]) shm |= v["name"] == "dshm" && v["emptyDir"]["medium"] == "Memory";
  EXPECT_TRUE(shm);
}

TEST(Render, JobSetAndIndexedJobSetRendezvousEnv) {
  for (const char* launcher : {"jobset", "indexed-job"}) {
    Job j = load("small", "launcher = \"pytorchjob\"", std::string("launcher = \"") + launcher + "\"");
    auto objs = render_trainer(j.infra, j.app);
    const Json& env = trainer_pod(objs)["containers"][0]["env"];
    std::map<std::string, Json> by_name;
    for (const auto& e : env) by_name[e["name"]] = e;
    ASSERT_TRUE(by_name.count("MASTER_ADDR")) << launcher;
    EXPECT_EQ(by_name["WORLD_SIZE"]["value"], "2");
    EXPECT_EQ(by_name["RANK"]["valueFrom"]["fieldRef"]["fieldPath"],
              "metadata.annotations['batch.kubernetes.io/job-completion-index']");
    if (std::string(launcher) == "indexed-job") {
      ASSERT_EQ(objs.size(), 2u);
      EXPECT_EQ(objs[0]["kind"], "Service");
      EXPECT_EQ(objs[0]["spec"]["clusterIP"], "None");
      EXPECT_EQ(objs[1]["spec"]["completionMode"], "Indexed");
      EXPECT_EQ(by_name["MASTER_ADDR"]["value"], "moerl-trainer-0.moerl-trainer.moerl-small.svc.cluster.local");
    } else {
      EXPECT_EQ(by_name["MASTER_ADDR"]["value"], "moerl-trainer-node-0-0.moerl-trainer");
    }
  }
}

TEST(Render, RolloutOnSpotWithDrainBudgetAndBounds) {
  Job j = load("reference-48");
  auto objs = render_rollout(j.infra, j.app);
  ASSERT_EQ(objs.size(), 3u);  // Deployment, PDB, HPA (autoscale_metric set)
  const Json& d = objs[0];
  EXPECT_EQ(d["kind"], "Deployment");
  EXPECT_EQ(d["spec"]["replicas"], 32);
  const Json& pod = d["spec"]["template"]["spec"];
  EXPECT_EQ(pod["terminationGracePeriodSeconds"], 90);
  EXPECT_EQ(pod["nodeSelector"][kNodeGroupLabel], "rollout");
  EXPECT_EQ(pod["containers"][0]["command"][0], "tini");
  EXPECT_EQ(pod["containers"][0]["command"][4], "rollout");
  // The runtime's drain must end before SIGKILL: drain deadline = grace period - 15 s.
  EXPECT_EQ(pod["containers"][0]["command"].back(), "runtime.drain_seconds=75");
  EXPECT_EQ(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "8");
  EXPECT_EQ(objs[1]["kind"], "PodDisruptionBudget");
  EXPECT_EQ(objs[1]["spec"]["maxUnavailable"], 8);
  EXPECT_EQ(objs[2]["spec"]["minReplicas"], 8);
  EXPECT_EQ(objs[2]["spec"]["maxReplicas"], 32);
  EXPECT_EQ(d["metadata"]["annotations"]["moerl.io/replicas-max"], "32");
  // Separate objects: nothing of the rollout names the trainer.
  EXPECT_EQ(d.dump().find("moerl-trainer"), std::string::npos);
}

TEST(Render, RedisWithAofOnAVolumeAndASecretPassword) {
  Job j = load("small");
  auto objs = render_redis(j.infra, j.app);
  const Json& sts = objs.back();
  EXPECT_EQ(sts["kind"], "StatefulSet");
  const Json& c = sts["spec"]["template"]["spec"]["containers"][0];
  std::string cmd = c["command"].dump();
  EXPECT_NE(cmd.find("\"--appendonly\",\"yes\""), std::string::npos);
  EXPECT_NE(cmd.find("\"--appendfsync\",\"everysec\""), std::string::npos);
  EXPECT_NE(cmd.find("$(REDIS_PASSWORD)"), std::string::npos);
  EXPECT_EQ(c["env"][0]["valueFrom"]["secretKeyRef"]["name"], kRedisName);
  EXPECT_EQ(sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"], "100Gi");
  Json secret = render_redis_secret(j.infra, j.app, "pw123");
  EXPECT_EQ(secret["stringData"]["password"], "pw123");
}

TEST(Render, IrsaServiceAccountAndLeastPrivilegeS3Policy) {
  Job j = load("small");
  auto base = render_base(j.infra, j.app);
  EXPECT_EQ(base[1]["metadata"]["annotations"]["eks.amazonaws.com/role-arn"], "arn:aws:iam::123456789012:role/moerl-small-job");
  EXPECT_EQ(base[2]["data"]["app.toml"], j.app.text);
  Json policy = render_iam_policy(j.infra, j.app);
  std::string p = policy.dump();
  EXPECT_NE(p.find("arn:aws:s3:::moerl-example-artifacts/runs/small/*"), std::string::npos);
  EXPECT_EQ(p.find("\"s3:*\""), std::string::npos);
  EXPECT_EQ(p.find("\"*\""), std::string::npos);
  for (const auto& st : policy["Statement"]) {
    for (const auto& a : st["Action"]) EXPECT_EQ(a.get<std::string>().rfind("s3:", 0), 0u);
  }
}

TEST(Render, EksctlNodeGroupsPerRole) {
  Job j = load("reference-48");
  Json c = render_cluster_config(j.infra, j.app);
  std::map<std::string, Json> groups;
  for (const auto& ng : c["managedNodeGroups"]) groups[ng["name"]] = ng;
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups["training"]["efaEnabled"], true);
  EXPECT_EQ(groups["training"]["availabilityZones"], Json::array({"us-east-1d"}));
  EXPECT_EQ(groups["training"]["instanceMarketOptions"]["marketType"], "capacity-block");
  EXPECT_EQ(groups["rollout"]["spot"], true);
  EXPECT_EQ(groups["rollout"]["instanceTypes"].size(), 3u);
  EXPECT_EQ(groups["buffer"]["taints"][0]["value"], "buffer");
  EXPECT_FALSE(groups["services"].contains("taints"));
  EXPECT_EQ(c["iam"]["podIdentityAssociations"][0]["serviceAccountName"], "moerl");
}

TEST(Yaml, QuotesWhatCouldBeMisreadAndKeepsBlocks) {
  Json doc{{"a", "1.31"}, {"b", "yes"}, {"c", "plain-word"}, {"d", "x: y"}, {"e", "line1\nline2\n"},
           {"f", Json::array({Json{{"k", 1}, {"l", Json::array({"v"})}}})}, {"g", Json::object()}, {"h", ""}};
  std::string y = to_yaml(doc);
  EXPECT_NE(y.find("a: \"1.31\"\n"), std::string::npos) << y;
  EXPECT_NE(y.find("b: \"yes\"\n"), std::string::npos) << y;
  EXPECT_NE(y.find("c: plain-word\n"), std::string::npos) << y;
  EXPECT_NE(y.find("d: \"x: y\"\n"), std::string::npos) << y;
  EXPECT_NE(y.find("e: |\n  line1\n  line2\n"), std::string::npos) << y;
  EXPECT_NE(y.find("f:\n- k: 1\n  l:\n  - v\n"), std::string::npos) << y;
  EXPECT_NE(y.find("g: {}\n"), std::string::npos) << y;
  EXPECT_NE(y.find("h: \"\"\n"), std::string::npos) << y;
}

TEST(Render, FilesAndSecretMode) {
  Job j = load("small");
  Rendered r = render(j.infra, j.app, {.redis_password = "abc"});
  for (const char* f : {"eksctl-cluster.yaml", "iam-policy.json", "k8s/00-base.yaml", "k8s/01-redis-secret.yaml",
                        "k8s/10-redis.yaml", "k8s/20-efa-device-plugin.yaml", "k8s/30-trainer.yaml", "k8s/40-rollout.yaml",
                        "README.md"}) {
    EXPECT_NE(r.find(f), nullptr) << f;
  }
  EXPECT_TRUE(r.find("k8s/01-redis-secret.yaml")->secret);
  std::string dir = testing::temp_dir("files");
  write_rendered(r, dir);
  auto perms = std::filesystem::status(dir + "/k8s/01-redis-secret.yaml").permissions();
  EXPECT_EQ(perms & std::filesystem::perms::others_read, std::filesystem::perms::none);
  remove_tree(dir);
}

}  // namespace
}  // namespace moerl::deploy
