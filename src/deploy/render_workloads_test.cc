// The two workloads as rendered: the trainer is ONE group of node pods under every launcher
// (PyTorchJob, JobSet, Indexed Job), each pod `moerl launch --nproc-per-node <GPUs of a node>`
// with the node-level rendezvous in its env; a rollout pod is one instance of APP
// rollout.ep_size GPUs.
#include <gtest/gtest.h>

#include <algorithm>

#include "deploy/pod_spec.h"
#include "deploy/render.h"
#include "deploy/test_util.h"

namespace moerl::deploy {
namespace {

using testing::Job;
using testing::load_job;
using testing::trainer_pod;

// The argv after tini's "--": what the pod's PID 1 starts.
std::vector<std::string> after_tini(const Json& command) {
  std::vector<std::string> argv = command.get<std::vector<std::string>>();
  EXPECT_EQ(std::vector<std::string>(argv.begin(), argv.begin() + 3), (std::vector<std::string>{"tini", "-g", "--"}));
  return std::vector<std::string>(argv.begin() + 3, argv.end());
}

// The ranks a launcher in the pod starts ("--nproc-per-node" N), 0 when the pod runs the
// role directly; and the role's argv each rank runs.
int64_t launched_ranks(const std::vector<std::string>& argv) {
  if (argv.size() < 4 || argv[1] != "launch" || argv[2] != "--nproc-per-node") return 0;
  return std::stoll(argv[3]);
}

std::vector<std::string> role_of(const std::vector<std::string>& argv) {
  auto sep = std::find(argv.begin(), argv.end(), "--");
  return launched_ranks(argv) > 0 ? std::vector<std::string>(sep + 1, argv.end()) : argv;
}

TEST(Render, TrainerGangOnOnDemandEfaNodes) {
  Job j = load_job("small");
  auto objs = render_trainer(j.infra, j.app);
  ASSERT_EQ(objs.size(), 1u);
  EXPECT_EQ(objs[0]["kind"], "PyTorchJob");
  // One trainer group over 2 nodes: a Master (node 0) and one Worker, gang-scheduled.
  EXPECT_EQ(objs[0]["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"], 1);
  EXPECT_EQ(objs[0]["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"], 1);
  EXPECT_EQ(objs[0]["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"], 2);
  // One launcher per pod: WORLD_SIZE / PET_NNODES count nodes, RANK is the node's.
  EXPECT_EQ(objs[0]["spec"]["nprocPerNode"], "1");
  const Json& pod = trainer_pod(objs);
  const Json& c = pod["containers"][0];
  EXPECT_EQ(c["name"], "pytorch");
  EXPECT_EQ(c["resources"]["requests"], c["resources"]["limits"]);
  EXPECT_EQ(c["resources"]["limits"]["vpc.amazonaws.com/efa"], "16");
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "8");
  EXPECT_EQ(c["resources"]["limits"]["hugepages-2Mi"], "5120Mi");
  std::vector<std::string> argv = after_tini(c["command"]);
  EXPECT_EQ(launched_ranks(argv), 8);  // every GPU of the node
  std::vector<std::string> role = role_of(argv);
  ASSERT_GE(role.size(), 3u);
  EXPECT_EQ(role[0], "moerl");
  EXPECT_EQ(role[1], "trainer");
  EXPECT_EQ(role[2], kAppPath);
  EXPECT_EQ(pod["nodeSelector"][kNodeGroupLabel], "training");
  const Json& expr = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0];
  EXPECT_EQ(expr["key"], "eks.amazonaws.com/capacityType");
  EXPECT_EQ(expr["values"], Json::array({"ON_DEMAND", "CAPACITY_BLOCK"}));
  bool shm = false;
  for (const auto& v : pod["volumes"]) shm |= v["name"] == "dshm" && v["emptyDir"]["medium"] == "Memory";
  EXPECT_TRUE(shm);
}

// Every launcher's pods run `moerl launch --nproc-per-node <GPUs of a node>` around the same
// trainer argv, with as many pods as training nodes: together ep.size ranks; the launcher gets
// the pod's grace period less 5 s before it SIGKILLs ranks that ignore SIGTERM.
TEST(Render, TrainerIsOneGroupOfNodePodsUnderEveryLauncher) {
  for (const char* launcher : {"pytorchjob", "jobset", "indexed-job"}) {
    SCOPED_TRACE(launcher);
    Job j = load_job("reference-48", "launcher = \"pytorchjob\"", std::string("launcher = \"") + launcher + "\"");
    auto objs = render_trainer(j.infra, j.app);
    const Json& job = objs.back();
    int64_t pods = 0;
    if (job["kind"] == "PyTorchJob") {
      for (const auto& [type, spec] : job["spec"]["pytorchReplicaSpecs"].items()) pods += spec["replicas"].get<int64_t>();
    } else if (job["kind"] == "JobSet") {
      pods = job["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"];
    } else {
      pods = job["spec"]["completions"];
      EXPECT_EQ(job["spec"]["parallelism"], pods);
    }
    const Json& pod = trainer_pod(objs);
    std::vector<std::string> argv = after_tini(pod["containers"][0]["command"]);
    EXPECT_EQ(pods, 16);
    EXPECT_EQ(pods * launched_ranks(argv), j.app.ep_size);
    EXPECT_EQ(argv[4], "--grace");
    EXPECT_EQ(std::stoll(argv[5]), pod["terminationGracePeriodSeconds"].get<int64_t>() - 5);
    EXPECT_EQ(role_of(argv)[1], "trainer");
  }
}

TEST(Render, JobSetAndIndexedJobSetRendezvousEnv) {
  for (const char* launcher : {"jobset", "indexed-job"}) {
    Job j = load_job("small", "launcher = \"pytorchjob\"", std::string("launcher = \"") + launcher + "\"");
    auto objs = render_trainer(j.infra, j.app);
    const Json& env = trainer_pod(objs)["containers"][0]["env"];
    std::map<std::string, Json> by_name;
    for (const auto& e : env) by_name[e["name"]] = e;
    ASSERT_TRUE(by_name.count("MASTER_ADDR")) << launcher;
    // Node-level: the launcher in each pod reads WORLD_SIZE as the node count, RANK as its node.
    EXPECT_EQ(by_name["WORLD_SIZE"]["value"], "2");
    EXPECT_EQ(by_name["MASTER_PORT"]["value"], std::to_string(kRendezvousPort));
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
  Job j = load_job("reference-48");
  auto objs = render_rollout(j.infra, j.app);
  ASSERT_EQ(objs.size(), 3u);  // Deployment, PDB, HPA (autoscale_metric set)
  const Json& d = objs[0];
  EXPECT_EQ(d["kind"], "Deployment");
  EXPECT_EQ(d["spec"]["replicas"], 32);
  const Json& pod = d["spec"]["template"]["spec"];
  EXPECT_EQ(pod["terminationGracePeriodSeconds"], 90);
  EXPECT_EQ(pod["nodeSelector"][kNodeGroupLabel], "rollout");
  // One instance of rollout.ep_size = 8 GPUs per pod, its ranks started by the launcher.
  std::vector<std::string> argv = after_tini(pod["containers"][0]["command"]);
  EXPECT_EQ(launched_ranks(argv), 8);
  EXPECT_EQ(std::vector<std::string>(argv.begin() + 4, argv.begin() + 6), (std::vector<std::string>{"--grace", "85"}));
  EXPECT_EQ(role_of(argv)[1], "rollout");
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

// A rollout pod is one instance of APP rollout.ep_size GPUs: it requests that many GPUs (and
// its share of the node) and runs the launcher, or the role itself for one GPU.
TEST(Render, RolloutInstancePodsOfRolloutEpSizeGpus) {
  for (int m : {1, 2}) {
    SCOPED_TRACE("rollout.ep_size = " + std::to_string(m));
    Job j = load_job("small", "", "", "ep_size = 2 ", "ep_size = " + std::to_string(m) + " ");
    const Json d = render_rollout(j.infra, j.app)[0];
    const Json& c = d["spec"]["template"]["spec"]["containers"][0];
    EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], std::to_string(m));
    // g6.12xlarge (48 vCPUs, 4 GPUs) is the smallest type: 90% of its CPUs, by GPU share.
    EXPECT_EQ(c["resources"]["limits"]["cpu"], std::to_string(48 * 900 * m / 4) + "m") << c["resources"].dump();
    std::vector<std::string> argv = after_tini(c["command"]);
    EXPECT_EQ(launched_ranks(argv), m == 1 ? 0 : m);
    EXPECT_EQ(role_of(argv)[0], "moerl");
    EXPECT_EQ(role_of(argv)[1], "rollout");
    EXPECT_EQ(d["spec"]["replicas"], 8);
  }
}

}  // namespace
}  // namespace moerl::deploy
