// End to end: `moerl deploy render` (MOERL_BIN) on both examples, then the strict offline
// validator in tools/k8s-schemas (node + ajv, schemas from kubernetes-models and from the
// operators' / eksctl's documented APIs). Negative cases inject one fault each into a
// rendered set and expect the validator to name it.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include <gtest/gtest.h>

#include "base/env.h"
#include "base/files.h"
#include "deploy/render.h"
#include "deploy/test_util.h"

namespace moerl::deploy {
namespace {

using testing::example;
using testing::read_file;
using testing::run_command;
using testing::write_file;

std::string validator() { return testing::source_dir() + "/tools/k8s-schemas/validate.js"; }

void require_tools() {
  ASSERT_TRUE(std::filesystem::exists(testing::source_dir() + "/tools/k8s-schemas/node_modules/kubernetes-models"))
      << "tools/k8s-schemas has no node_modules; run scripts/install-deps.sh (npm ci there)";
  ASSERT_EQ(run_command("node --version").status, 0) << "node is not on PATH";
}

// The instance table as the validator reads it (from the binary, or from the library).
std::string types_json(const std::string& dir) {
  Json all = Json::object();
  for (const auto& t : instance_types()) {
    all[t.name] = {{"vcpus", t.vcpus}, {"memory_gib", t.memory_gib}, {"gpus", t.gpus},
                   {"gpu", t.gpu}, {"gpu_memory_gib", t.gpu_memory_gib}, {"efa_interfaces", t.efa_interfaces}};
  }
  std::string path = dir + "/types.json";
  write_file(path, all.dump(2));
  return path;
}

// A rendered set kept as JSON so a test can break one field before writing it.
struct JsonSet {
  Json cluster, policy;
  std::map<std::string, std::vector<Json>> k8s;

  static JsonSet of(const InfraConfig& infra, const AppView& app) {
    JsonSet s;
    s.cluster = render_cluster_config(infra, app);
    s.policy = render_iam_policy(infra, app);
    s.k8s["00-base.yaml"] = render_base(infra, app);
    s.k8s["01-redis-secret.yaml"] = {render_redis_secret(infra, app, "test-password")};
    s.k8s["10-redis.yaml"] = render_redis(infra, app);
    s.k8s["20-efa-device-plugin.yaml"] = render_efa_device_plugin(infra);
    s.k8s["30-trainer.yaml"] = render_trainer(infra, app);
    s.k8s["40-rollout.yaml"] = render_rollout(infra, app);
    return s;
  }
  void write(const std::string& dir) const {
    write_file(dir + "/eksctl-cluster.yaml", to_yaml(cluster));
    write_file(dir + "/iam-policy.json", policy.dump(2));
    for (const auto& [f, docs] : k8s) write_file(dir + "/k8s/" + f, to_yaml_stream(docs));
  }
};

struct Loaded {
  InfraConfig infra;
  AppView app;
};

Loaded load_small(const std::string& launcher = "pytorchjob") {
  std::string text = testing::replace_once(read_file(example("small", "infra.toml")), "launcher = \"pytorchjob\"",
                                           "launcher = \"" + launcher + "\"");
  Loaded l{parse_infra(text, "infra.toml"), load_app_view(example("small", "app.toml"))};
  validate_infra(l.infra, l.app);
  return l;
}

// Lines the validator printed for one directory.
std::vector<std::string> lines_for(const std::string& output, const std::string& dir) {
  std::vector<std::string> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(dir + ": ", 0) == 0) out.push_back(line.substr(dir.size() + 2));
  }
  return out;
}

TEST(Validate, BothExamplesRenderWithTheBinaryAndValidateStrictly) {
  require_tools();
  const std::string bin = env::get_or("MOERL_BIN", "");
  ASSERT_FALSE(bin.empty()) << "MOERL_BIN is not set (ctest sets it)";
  std::string tmp = testing::temp_dir("examples");
  auto types = run_command(bin + " deploy instance-types --json > " + tmp + "/types.json");
  ASSERT_EQ(types.status, 0) << types.output;
  std::string dirs;
  for (const char* name : {"small", "reference-48"}) {
    std::string out = tmp + "/" + name;
    auto r = run_command(bin + " deploy render --app " + example(name, "app.toml") + " --infra " +
                         example(name, "infra.toml") + " --out " + out);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find(out + "/k8s/30-trainer.yaml"), std::string::npos) << r.output;
    dirs += " " + out;
  }
  // The other launchers, rendered through the library.
  for (const char* launcher : {"jobset", "indexed-job"}) {
    Loaded l = load_small(launcher);
    JsonSet::of(l.infra, l.app).write(tmp + "/" + launcher);
    dirs += " " + tmp + "/" + launcher;
  }
  auto v = run_command("node " + validator() + " --instance-types " + tmp + "/types.json" + dirs);
  EXPECT_EQ(v.status, 0) << v.output;
  for (const char* name : {"small", "reference-48", "jobset", "indexed-job"}) {
    auto lines = lines_for(v.output, tmp + "/" + name);
    ASSERT_EQ(lines.size(), 1u) << v.output;
    EXPECT_NE(lines[0].find("objects valid"), std::string::npos) << lines[0];
  }
  // The rendered secret is not world-readable; the trainer manifest names the INFRA image.
  auto perms = std::filesystem::status(tmp + "/small/k8s/01-redis-secret.yaml").permissions();
  EXPECT_EQ(perms & std::filesystem::perms::others_read, std::filesystem::perms::none);
  EXPECT_NE(read_file(tmp + "/small/k8s/30-trainer.yaml").find("moerl:0.1.0-cuda"), std::string::npos);
  remove_tree(tmp);
}

TEST(Validate, BinaryReportsInvalidInfraNamingTheField) {
  const std::string bin = env::get_or("MOERL_BIN", "");
  ASSERT_FALSE(bin.empty());
  std::string tmp = testing::temp_dir("badinfra");
  write_file(tmp + "/infra.toml", testing::replace_once(read_file(example("small", "infra.toml")),
                                                        "instance_type = \"p5en.48xlarge\"", "instance_type = \"p5en.96xlarge\""));
  auto r = run_command(bin + " deploy render --app " + example("small", "app.toml") + " --infra " + tmp +
                       "/infra.toml --out " + tmp + "/out");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("node_groups.training.instance_type"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("p5en.96xlarge"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(tmp + "/out")) << "nothing is written on invalid input";
  remove_tree(tmp);
}

struct Fault {
  std::string name;
  std::string launcher;
  std::function<void(JsonSet&)> inject;
  std::string expect;  // text the validator must print for this directory
};

Json& first_of_kind(JsonSet& s, const std::string& file, const std::string& kind) {
  for (auto& d : s.k8s.at(file)) {
    if (d["kind"] == kind) return d;
  }
  throw std::runtime_error("no " + kind + " in " + file);
}

TEST(Validate, InjectedFaultsAreRejected) {
  require_tools();
  std::vector<Fault> faults = {
      {"unknown-field-container", "pytorchjob",
       [](JsonSet& s) { first_of_kind(s, "40-rollout.yaml", "Deployment")["spec"]["template"]["spec"]["containers"][0]["bogusField"] = 1; },
       "unknown field \"bogusField\""},
      {"unknown-field-pytorchjob-pod", "pytorchjob",
       [](JsonSet& s) {
         first_of_kind(s, "30-trainer.yaml", "PyTorchJob")["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["nodeSelectr"] = Json{{"a", "b"}};
       },
       "unknown field \"nodeSelectr\""},
      {"unknown-field-pytorchjob-spec", "pytorchjob",
       [](JsonSet& s) { first_of_kind(s, "30-trainer.yaml", "PyTorchJob")["spec"]["elasticPolicyy"] = Json::object(); },
       "unknown field \"elasticPolicyy\""},
      {"unknown-field-jobset", "jobset",
       [](JsonSet& s) { first_of_kind(s, "30-trainer.yaml", "JobSet")["spec"]["network"]["enableDnsHostnames"] = true; },
       "unknown field \"enableDnsHostnames\""},
      {"unknown-field-jobset-pod", "jobset",
       [](JsonSet& s) {
         first_of_kind(s, "30-trainer.yaml", "JobSet")["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["resurces"] = 1;
       },
       "unknown field \"resurces\""},
      {"unknown-field-eksctl", "pytorchjob", [](JsonSet& s) { s.cluster["managedNodeGroups"][2]["efaEnable"] = true; },
       "unknown field \"efaEnable\""},
      {"unknown-field-redis", "pytorchjob",
       [](JsonSet& s) { first_of_kind(s, "10-redis.yaml", "StatefulSet")["spec"]["volumeClaimTemplate"] = Json::array(); },
       "unknown field \"volumeClaimTemplate\""},
      {"hugepages-mismatch", "pytorchjob",
       [](JsonSet& s) {
         first_of_kind(s, "30-trainer.yaml", "PyTorchJob")["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"]["limits"]["hugepages-2Mi"] = "4096Mi";
       },
       "hugepages-2Mi requests (5120Mi) must equal limits (4096Mi)"},
      {"efa-over-instance", "indexed-job",
       [](JsonSet& s) {
         Json& r = first_of_kind(s, "30-trainer.yaml", "Job")["spec"]["template"]["spec"]["containers"][0]["resources"];
         r["requests"]["vpc.amazonaws.com/efa"] = "32";
         r["limits"]["vpc.amazonaws.com/efa"] = "32";
       },
       "requests 32 EFA interfaces, p5en.48xlarge has 16"},
      {"spot-grace", "pytorchjob",
       [](JsonSet& s) { first_of_kind(s, "40-rollout.yaml", "Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 150; },
       "must be set and < 120 on Spot node group rollout"},
      {"dns-name", "pytorchjob",
       [](JsonSet& s) { first_of_kind(s, "40-rollout.yaml", "Deployment")["metadata"]["name"] = "moerl_Rollout"; },
       "is not a DNS-1123"},
      {"efa-two-zones", "pytorchjob",
       [](JsonSet& s) { s.cluster["managedNodeGroups"][2]["availabilityZones"] = Json::array({"us-east-2a", "us-east-2b"}); },
       "exactly one availability zone"},
      {"privileged", "pytorchjob",
       [](JsonSet& s) {
         first_of_kind(s, "40-rollout.yaml", "Deployment")["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = true;
       },
       "privileged container outside the EFA device plugin"},
      {"root-pod", "pytorchjob",
       [](JsonSet& s) { first_of_kind(s, "10-redis.yaml", "StatefulSet")["spec"]["template"]["spec"]["securityContext"].erase("runAsNonRoot"); },
       "runAsNonRoot must be true"},
      {"no-seccomp", "jobset",
       [](JsonSet& s) {
         first_of_kind(s, "30-trainer.yaml", "JobSet")["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["securityContext"].erase("seccompProfile");
       },
       "seccompProfile.type must be RuntimeDefault"},
      {"capabilities-kept", "pytorchjob",
       [](JsonSet& s) {
         first_of_kind(s, "40-rollout.yaml", "Deployment")["spec"]["template"]["spec"]["containers"][0]["securityContext"].erase("capabilities");
       },
       "capabilities.drop must include ALL"},
      {"redis-open", "pytorchjob",
       [](JsonSet& s) {
         auto& docs = s.k8s.at("10-redis.yaml");
         docs.erase(std::remove_if(docs.begin(), docs.end(), [](const Json& d) { return d["kind"] == "NetworkPolicy"; }), docs.end());
       },
       "no NetworkPolicy limits who reaches Redis"},
      {"trainer-on-spot", "pytorchjob",
       [](JsonSet& s) {
         auto& specs = first_of_kind(s, "30-trainer.yaml", "PyTorchJob")["spec"]["pytorchReplicaSpecs"];
         specs["Master"]["template"]["spec"]["nodeSelector"]["moerl.io/node-group"] = "rollout";
       },
       "must run on on-demand nodes"},
  };
  std::string tmp = testing::temp_dir("faults");
  std::string dirs;
  for (const auto& f : faults) {
    Loaded l = load_small(f.launcher);
    JsonSet s = JsonSet::of(l.infra, l.app);
    f.inject(s);
    s.write(tmp + "/" + f.name);
    dirs += " " + tmp + "/" + f.name;
  }
  auto v = run_command("node " + validator() + " --instance-types " + types_json(tmp) + dirs);
  EXPECT_EQ(v.status, 1) << v.output;
  for (const auto& f : faults) {
    auto lines = lines_for(v.output, tmp + "/" + f.name);
    bool found = false;
    for (const auto& l : lines) {
      EXPECT_EQ(l.find("objects valid"), std::string::npos) << f.name << ": " << l;
      found |= l.find(f.expect) != std::string::npos;
    }
    EXPECT_TRUE(found) << f.name << ": expected '" << f.expect << "' in:\n" << v.output;
  }
  remove_tree(tmp);
}

}  // namespace
}  // namespace moerl::deploy

namespace moerl::deploy {
namespace {

TEST(RehearsePlan, ReadsBackTheRolesCommandsAndEnvFromTheYaml) {
  require_tools();
  std::string tmp = testing::temp_dir("plan");
  Loaded l = load_small();
  JsonSet::of(l.infra, l.app).write(tmp + "/rendered");
  auto r = run_command("node " + testing::source_dir() + "/tools/k8s-schemas/rehearse-plan.js " + tmp + "/rendered");
  ASSERT_EQ(r.status, 0) << r.output;
  Json plan = Json::parse(r.output);
  EXPECT_EQ(plan["app_toml"], l.app.text);
  EXPECT_EQ(plan["app_path"], "/etc/moerl/app.toml");
  // Redis: the password from the Secret in the env (REDISCLI_AUTH), on no argv; the probe too.
  EXPECT_EQ(plan["redis"]["env"]["REDISCLI_AUTH"], "test-password");
  EXPECT_EQ(plan["redis"]["argv"].dump().find("test-password"), std::string::npos) << plan["redis"].dump();
  EXPECT_EQ(plan["redis"]["probe"].dump().find("test-password"), std::string::npos) << plan["redis"].dump();
  std::map<std::string, int64_t> replicas;
  std::map<std::string, int64_t> first_node;
  for (const auto& role : plan["roles"]) {
    replicas[role["name"]] += role["replicas"].get<int64_t>();
    first_node[role["replica_group"]] = role["first_node"];
    // The pod's PID 1 child is the launcher; each of its ranks runs the role's argv.
    EXPECT_EQ(role["argv"][0], "moerl");
    EXPECT_EQ(role["argv"][1], "launch");
    EXPECT_EQ(role["launch"]["nproc_per_node"], role["name"] == "trainer" ? 8 : 2) << role.dump();
    EXPECT_EQ(role["role_argv"][0], "moerl");
    EXPECT_EQ(role["role_argv"][1], role["name"]);
    EXPECT_EQ(role["role_argv"][4], "runtime.queue_url=redis://moerl-redis.moerl-small.svc.cluster.local:6379/0");
    EXPECT_EQ(role["env"]["MOERL_REDIS_PASSWORD"], "test-password");
    EXPECT_EQ(role["env"]["AWS_REGION"], "us-east-2");
    bool pod_name = false;
    for (const auto& inj : role["injected"]) pod_name = pod_name || inj.value("name", "") == "POD_NAME";
    EXPECT_TRUE(pod_name) << role["name"] << ": POD_NAME is not injected from metadata.name: " << role.dump();
  }
  EXPECT_EQ(replicas["trainer"], 2);  // one trainer group: node pods Master (node 0) + Worker (node 1)
  EXPECT_EQ(first_node["/spec/pytorchReplicaSpecs/Master/template"], 0);
  EXPECT_EQ(first_node["/spec/pytorchReplicaSpecs/Worker/template"], 1);
  EXPECT_EQ(replicas["rollout"], 8);  // instance pods
  remove_tree(tmp);
}

}  // namespace
}  // namespace moerl::deploy
