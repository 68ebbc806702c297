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

using testing::Job;
using testing::load_job;
using testing::trainer_pod;

// Prometheus finds every role: the pod templates carry the scrape annotations, the container
// exposes the port, and the role's command turns the endpoint on at that port.
TEST(Render, EveryRoleServesPrometheusWithScrapeAnnotations) {
  for (const char* launcher : {"pytorchjob", "jobset", "indexed-job"}) {
    Job j = load_job("small", "launcher = \"pytorchjob\"", std::string("launcher = \"") + launcher + "\"");
    std::vector<std::pair<Json, Json>> pods;  // (template metadata, pod spec)
    std::vector<Json> trainer = render_trainer(j.infra, j.app);
    const Json& job = trainer.back();
    const Json& tmpl = job["kind"] == "PyTorchJob" ? job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
                       : job["kind"] == "JobSet"   ? job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
                                                   : job["spec"]["template"];
    pods.emplace_back(tmpl["metadata"], tmpl["spec"]);
    const Json rollout = render_rollout(j.infra, j.app)[0]["spec"]["template"];
    pods.emplace_back(rollout["metadata"], rollout["spec"]);
    for (const auto& [meta, spec] : pods) {
      SCOPED_TRACE(std::string(launcher) + " " + meta["labels"]["app.kubernetes.io/component"].get<std::string>());
      EXPECT_EQ(meta["annotations"]["prometheus.io/scrape"], "true");
      EXPECT_EQ(meta["annotations"]["prometheus.io/port"], std::to_string(kMetricsPort));
      EXPECT_EQ(meta["annotations"]["prometheus.io/path"], "/metrics");
      const Json& c = spec["containers"][0];
      bool port = false;
      for (const auto& p : c["ports"]) port |= p["containerPort"] == kMetricsPort && p["name"] == "metrics";
      EXPECT_TRUE(port) << c["ports"].dump();
      const std::string argv = c["command"].dump();
      EXPECT_NE(argv.find("\"metrics.prometheus_port=" + std::to_string(kMetricsPort) + "\""), std::string::npos) << argv;
    }
  }
}

TEST(Render, RolesGetTheirPodNameFromTheDownwardApi) {
  // The rollout worker id defaults to POD_NAME + a random suffix (PIDs repeat across pods);
  // the rendered roles pass no --worker-id.
  Job j = load_job("reference-48");
  std::vector<std::pair<std::string, Json>> pods = {
      {"rollout", render_rollout(j.infra, j.app)[0]["spec"]["template"]["spec"]},
      {"trainer", trainer_pod(render_trainer(j.infra, j.app))}};
  for (const auto& [role, pod] : pods) {
    const Json& c = pod["containers"][0];
    EXPECT_EQ(c["command"].dump().find("--worker-id"), std::string::npos) << role;
    Json pod_name;
    for (const auto& e : c["env"]) {
      if (e["name"] == "POD_NAME") pod_name = e;
    }
    ASSERT_FALSE(pod_name.is_null()) << role << ": no POD_NAME in " << c["env"].dump();
    EXPECT_EQ(pod_name["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name") << role;
    EXPECT_EQ(pod_name["valueFrom"]["fieldRef"]["apiVersion"], "v1") << role;
  }
}

TEST(Render, RedisWithAofOnAVolumeAndASecretPassword) {
  Job j = load_job("small", "appendfsync = \"always\"", "# appendfsync: the default");
  auto objs = render_redis(j.infra, j.app);
  const Json& sts = objs.back();
  EXPECT_EQ(sts["kind"], "StatefulSet");
  const Json& c = sts["spec"]["template"]["spec"]["containers"][0];
  std::string cmd = c["command"].dump();
  EXPECT_NE(cmd.find("\"--appendonly\",\"yes\""), std::string::npos);
  // Every acknowledged write is on disk before the reply (docs/runtime.md: put() is
  // AOF-fsynced); "everysec" stays selectable in INFRA.
  EXPECT_NE(cmd.find("\"--appendfsync\",\"always\""), std::string::npos) << cmd;
  EXPECT_EQ(c["env"][0]["valueFrom"]["secretKeyRef"]["name"], kRedisName);
  EXPECT_EQ(sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"], "100Gi");
  Json secret = render_redis_secret(j.infra, j.app, "pw123");
  EXPECT_EQ(secret["stringData"]["password"], "pw123");
  Job e = load_job("small", "appendfsync = \"always\"", "appendfsync = \"everysec\"");
  EXPECT_NE(render_redis(e.infra, e.app).back().dump().find("\"--appendfsync\",\"everysec\""), std::string::npos);
}

// The password reaches redis-server, its readiness probe and the roles without any argv: the
// server reads `requirepass` from stdin, redis-cli takes REDISCLI_AUTH, the roles
// MOERL_REDIS_PASSWORD; all three from the Secret.
TEST(Render, RedisPasswordIsOnNoArgv) {
  Job j = load_job("small");
  const Json sts = render_redis(j.infra, j.app).back();
  const Json& redis = sts["spec"]["template"]["spec"]["containers"][0];
  const std::string argv = redis["command"].dump();
  EXPECT_EQ(argv.find("--requirepass"), std::string::npos) << argv;
  EXPECT_EQ(argv.find("$("), std::string::npos) << argv;  // no Kubernetes expansion of a secret
  EXPECT_EQ(redis["command"][0], "sh");
  EXPECT_NE(redis["command"][2].get<std::string>().find("exec redis-server - \"$@\" <<EOF\nrequirepass $REDISCLI_AUTH\n"),
            std::string::npos) << argv;
  EXPECT_EQ(redis["env"][0]["name"], "REDISCLI_AUTH");
  EXPECT_EQ(redis["env"][0]["valueFrom"]["secretKeyRef"]["key"], kRedisSecretKey);
  const std::string probe = redis["readinessProbe"]["exec"]["command"].dump();
  EXPECT_EQ(probe, "[\"sh\",\"-c\",\"redis-cli ping | grep -q PONG\"]");
  for (const Json& pod : {trainer_pod(render_trainer(j.infra, j.app)), render_rollout(j.infra, j.app)[0]["spec"]["template"]["spec"]}) {
    const Json& c = pod["containers"][0];
    const std::string role_argv = c["command"].dump();
    EXPECT_NE(role_argv.find("\"runtime.queue_url=redis://moerl-redis.moerl-small.svc.cluster.local:6379/0\""), std::string::npos)
        << role_argv;
    EXPECT_EQ(role_argv.find("PASSWORD"), std::string::npos) << role_argv;
    bool from_secret = false;
    for (const auto& e : c["env"]) {
      from_secret |= e["name"] == "MOERL_REDIS_PASSWORD" && e["valueFrom"]["secretKeyRef"]["name"] == kRedisName;
    }
    EXPECT_TRUE(from_secret) << c["env"].dump();
  }
}

// Only the job's trainer and rollout pods reach Redis, on its port; EKS's VPC CNI is told to
// enforce NetworkPolicy.
TEST(Render, NetworkPolicyLetsOnlyTheJobsPodsReachRedis) {
  Job j = load_job("small");
  auto objs = render_redis(j.infra, j.app);
  const Json* np = nullptr;
  for (const auto& o : objs) {
    if (o["kind"] == "NetworkPolicy") np = &o;
  }
  ASSERT_NE(np, nullptr);
  EXPECT_EQ((*np)["apiVersion"], "networking.k8s.io/v1");
  const Json& spec = (*np)["spec"];
  const Json& redis_labels = objs.back()["spec"]["template"]["metadata"]["labels"];
  for (const auto& [k, v] : spec["podSelector"]["matchLabels"].items()) EXPECT_EQ(redis_labels[k], v) << k;
  EXPECT_EQ(spec["policyTypes"], Json::array({"Ingress"}));
  ASSERT_EQ(spec["ingress"].size(), 1u);
  EXPECT_EQ(spec["ingress"][0]["ports"], Json::array({Json{{"protocol", "TCP"}, {"port", kRedisPort}}}));
  ASSERT_EQ(spec["ingress"][0]["from"].size(), 1u);
  const Json& from = spec["ingress"][0]["from"][0];
  EXPECT_FALSE(from.contains("namespaceSelector"));  // this namespace only
  const Json& sel = from["podSelector"];
  EXPECT_EQ(sel["matchLabels"]["app.kubernetes.io/instance"], "small");
  EXPECT_EQ(sel["matchExpressions"][0]["values"], Json::array({"trainer", "rollout"}));
  // The roles' pods match it: their labels hold every matchLabel and a listed component.
  const Json trainer = render_trainer(j.infra, j.app).back()["spec"]["pytorchReplicaSpecs"]["Master"]["template"];
  for (const Json& tmpl : {trainer, render_rollout(j.infra, j.app)[0]["spec"]["template"]}) {
    const Json& l = tmpl["metadata"]["labels"];
    for (const auto& [k, v] : sel["matchLabels"].items()) EXPECT_EQ(l[k], v) << k;
    EXPECT_NE(l["app.kubernetes.io/component"], "redis");
  }
  Json cluster = render_cluster_config(j.infra, j.app);
  EXPECT_EQ(cluster["addons"][0]["name"], "vpc-cni");
  EXPECT_EQ(cluster["addons"][0]["configurationValues"], "{\"enableNetworkPolicy\": \"true\"}");
}

// Every pod the renderer makes: seccomp RuntimeDefault; every container: no privilege
// escalation, every capability dropped (EFA keeps IPC_LOCK); every pod but the EFA device
// plugin (a kubelet socket in a root-owned dir) runs as non-root.
TEST(Render, EveryPodRunsNonRootWithRuntimeDefaultSeccomp) {
  for (const char* launcher : {"pytorchjob", "jobset", "indexed-job"}) {
    Job j = load_job("small", "launcher = \"pytorchjob\"", std::string("launcher = \"") + launcher + "\"");
    std::vector<std::pair<std::string, Json>> pods = {
        {"trainer", trainer_pod(render_trainer(j.infra, j.app))},
        {"rollout", render_rollout(j.infra, j.app)[0]["spec"]["template"]["spec"]},
        {"redis", render_redis(j.infra, j.app).back()["spec"]["template"]["spec"]},
        {"efa-plugin", render_efa_device_plugin(j.infra)[0]["spec"]["template"]["spec"]}};
    for (const auto& [name, pod] : pods) {
      SCOPED_TRACE(std::string(launcher) + " " + name);
      const Json sc = pod.value("securityContext", Json::object());
      EXPECT_EQ(sc.value("seccompProfile", Json::object()).value("type", ""), "RuntimeDefault") << sc.dump();
      if (name != "efa-plugin") {
        EXPECT_EQ(sc.value("runAsNonRoot", false), true) << sc.dump();
        EXPECT_GT(sc.value("runAsUser", int64_t{0}), 0);
      }
      for (const auto& c : pod["containers"]) {
        EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
        EXPECT_EQ(c["securityContext"]["capabilities"]["drop"], Json::array({"ALL"}));
      }
    }
  }
}

TEST(Render, IrsaServiceAccountAndLeastPrivilegeS3Policy) {
  Job j = load_job("small");
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

// S3 cannot scope s3:ListBucketMultipartUploads to a prefix (the action has no s3:prefix
// condition key), so the policy must not need it: every statement is on the job's objects,
// or on the bucket with an s3:prefix condition inside the job's prefix.
TEST(Render, EveryIamStatementIsScopedToTheJobPrefix) {
  for (const char* name : {"small", "reference-48"}) {
    Job j = load_job(name);
    const std::string bucket_arn = "arn:aws:s3:::" + j.infra.bucket;
    const std::string prefix = j.infra.prefix;
    ASSERT_FALSE(prefix.empty()) << name;
    Json policy = render_iam_policy(j.infra, j.app);
    ASSERT_FALSE(policy["Statement"].empty());
    for (const auto& st : policy["Statement"]) {
      EXPECT_EQ(st["Effect"], "Allow") << st.dump();
      Json resources = st["Resource"].is_array() ? st["Resource"] : Json::array({st["Resource"]});
      for (const auto& r : resources) {
        std::string res = r.get<std::string>();
        if (res.rfind(bucket_arn + "/", 0) == 0) {
          EXPECT_EQ(res.rfind(bucket_arn + "/" + prefix + "/", 0), 0u) << name << ": object grant outside the prefix: " << st.dump();
          continue;
        }
        ASSERT_EQ(res, bucket_arn) << st.dump();
        // A bucket-level grant: only listing, and only under the job's prefix.
        EXPECT_EQ(st["Action"], Json::array({"s3:ListBucket"})) << name << ": bucket-wide action " << st.dump();
        Json allowed = st.value("Condition", Json::object()).value("StringLike", Json::object()).value("s3:prefix", Json());
        ASSERT_TRUE(allowed.is_array() && !allowed.empty()) << name << ": no s3:prefix condition on " << st.dump();
        for (const auto& a : allowed) {
          std::string v = a.get<std::string>();
          EXPECT_TRUE(v == prefix || v.rfind(prefix + "/", 0) == 0) << name << ": s3:prefix " << v << " outside " << prefix;
        }
      }
    }
    std::string p = policy.dump();
    EXPECT_EQ(p.find("s3:ListBucketMultipartUploads"), std::string::npos) << p;
    EXPECT_EQ(p.find("s3:ListMultipartUploadParts"), std::string::npos) << "nothing calls ListParts: " << p;
  }
}

TEST(Render, EksctlNodeGroupsPerRole) {
  Job j = load_job("reference-48");
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
  Job j = load_job("small");
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
