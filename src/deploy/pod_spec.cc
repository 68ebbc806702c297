// Shared pod-spec pieces for the trainer, the rollout workers and Redis.
#include "deploy/pod_spec.h"

#include <algorithm>
#include <cctype>

namespace moerl::deploy {

namespace {

std::string dns_label(const std::string& s) {
  std::string out;
  for (char ch : s) {
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    out += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
  }
  while (!out.empty() && out.front() == '-') out.erase(out.begin());
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "moerl" : out;
}

}  // namespace

Json labels(const AppView& app, const std::string& component) {
  return Json{{"app.kubernetes.io/name", "moerl"},
              {"app.kubernetes.io/instance", dns_label(app.name)},
              {"app.kubernetes.io/component", component}};
}

Json metadata(const InfraConfig& infra, const AppView& app, const std::string& name, const std::string& component) {
  return Json{{"name", name}, {"namespace", infra.namespace_}, {"labels", labels(app, component)}};
}

void place_on(Json& pod_spec, const NodeGroup& group, bool on_demand_only) {
  pod_spec["nodeSelector"] = Json{{kNodeGroupLabel, group.key}};
  Json tolerations = Json::array();
  tolerations.push_back(
      Json{{"key", kNodeGroupLabel}, {"operator", "Equal"}, {"value", group.key}, {"effect", "NoSchedule"}});
  if (group.smallest.gpus > 0) {
    tolerations.push_back(Json{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}});
  }
  pod_spec["tolerations"] = tolerations;
  // EKS labels every managed node with its capacity type; the trainer must never take Spot.
  Json values = Json::array();
  if (on_demand_only) {
    values = Json::array({"ON_DEMAND", "CAPACITY_BLOCK"});
  } else if (group.capacity == Capacity::kSpot) {
    values = Json::array({"SPOT"});
  }
  if (!values.empty()) {
    pod_spec["affinity"] = Json{
        {"nodeAffinity",
         Json{{"requiredDuringSchedulingIgnoredDuringExecution",
               Json{{"nodeSelectorTerms",
                     Json::array({Json{{"matchExpressions",
                                        Json::array({Json{{"key", "eks.amazonaws.com/capacityType"},
                                                          {"operator", "In"},
                                                          {"values", values}}})}}})}}}}}};
  }
}

Json resources(int64_t cpu_milli, int64_t memory_mib, int64_t gpus, int64_t efa, int64_t hugepages_2mi_mib) {
  Json r = Json::object();
  if (cpu_milli > 0) r["cpu"] = cpu_milli % 1000 == 0 ? std::to_string(cpu_milli / 1000) : std::to_string(cpu_milli) + "m";
  if (memory_mib > 0) r["memory"] = std::to_string(memory_mib) + "Mi";
  if (hugepages_2mi_mib > 0) r["hugepages-2Mi"] = std::to_string(hugepages_2mi_mib) + "Mi";
  if (gpus > 0) r["nvidia.com/gpu"] = std::to_string(gpus);
  if (efa > 0) r["vpc.amazonaws.com/efa"] = std::to_string(efa);
  // NOTE: extended resources (GPU, EFA) and hugepages must have requests == limits; using
  // the same object for both also gives the pod Guaranteed QoS.
  return Json{{"requests", r}, {"limits", r}};
}

Json shm_volume(int64_t gib) {
  return Json{{"name", "dshm"}, {"emptyDir", Json{{"medium", "Memory"}, {"sizeLimit", std::to_string(gib) + "Gi"}}}};
}

Json app_config_volume() {
  return Json{{"name", "app-config"},
              {"configMap", Json{{"name", kAppConfigMap}, {"items", Json::array({Json{{"key", "app.toml"}, {"path", "app.toml"}}})}}}};
}

Json volume_mounts(bool with_shm) {
  Json m = Json::array({Json{{"name", "app-config"}, {"mountPath", "/etc/moerl"}, {"readOnly", true}}});
  if (with_shm) m.push_back(Json{{"name", "dshm"}, {"mountPath", "/dev/shm"}});
  return m;
}

std::string redis_url(const InfraConfig& infra) {
  return "redis://" + std::string(kRedisName) + "." + infra.namespace_ +
         ".svc.cluster.local:" + std::to_string(kRedisPort) + "/0";
}

Json role_env(const InfraConfig& infra, bool efa) {
  std::string secret = infra.redis_password_secret.empty() ? kRedisName : infra.redis_password_secret;
  Json env = Json::array();
  // The runtime reads the password from here (docs/runtime.md "Config"); it is on no argv.
  env.push_back(Json{{"name", "MOERL_REDIS_PASSWORD"},
                     {"valueFrom", Json{{"secretKeyRef", Json{{"name", secret}, {"key", kRedisSecretKey}}}}}});
  // The downward API's pod name prefixes the rollout worker id (a random suffix is added per
  // start): PIDs repeat across pods, pod names do not.
  env.push_back(Json{{"name", "POD_NAME"},
                     {"valueFrom", Json{{"fieldRef", Json{{"apiVersion", "v1"}, {"fieldPath", "metadata.name"}}}}}});
  env.push_back(Json{{"name", "AWS_REGION"}, {"value", infra.region}});
  env.push_back(Json{{"name", "MOERL_LOG_LEVEL"}, {"value", "info"}});
  if (efa) {
    // libfabric >= 1.18 with aws-ofi-nccl >= 1.7 picks EFA on its own; moerl's own EP
    // transport reads FI_PROVIDER, so name it explicitly.
    env.push_back(Json{{"name", "FI_PROVIDER"}, {"value", infra.efa_provider_env}});
    env.push_back(Json{{"name", "FI_EFA_USE_DEVICE_RDMA"}, {"value", "1"}});
    env.push_back(Json{{"name", "NCCL_DEBUG"}, {"value", "WARN"}});
  }
  return env;
}

Json role_argv(const InfraConfig& infra, const std::string& role) {
  Json argv = Json::array({"moerl", role, kAppPath, "--set", "runtime.queue_url=" + redis_url(infra), "--set",
                           "metrics.prometheus_port=" + std::to_string(kMetricsPort)});
  if (role == "rollout") {
    argv.push_back("--set");
    argv.push_back("runtime.drain_seconds=" + std::to_string(drain_seconds(infra)));
  }
  return argv;
}

Json pod_command(const Json& role_argv, int64_t launch_ranks, int64_t pod_grace_seconds) {
  // tini is PID 1: it forwards SIGTERM to its child's process group (-g) and reaps zombies.
  // The child is the launcher (which forwards the signal to each rank and dies with no rank
  // left behind) or, for one process, the role itself, whose drain handler sees the signal.
  Json argv = Json::array({"tini", "-g", "--"});
  if (launch_ranks > 0) {
    const std::string n = std::to_string(launch_ranks);
    const std::string grace = std::to_string(launcher_grace_seconds(pod_grace_seconds));
    for (const std::string& a : std::vector<std::string>{"moerl", "launch", "--nproc-per-node", n, "--grace", grace, "--"}) {
      argv.push_back(a);
    }
  }
  for (const auto& a : role_argv) argv.push_back(a);
  return argv;
}

int64_t launcher_grace_seconds(int64_t pod_grace_seconds) { return std::max<int64_t>(1, pod_grace_seconds - 5); }

Json scrape_annotations() {
  return Json{{"prometheus.io/scrape", "true"},
              {"prometheus.io/port", std::to_string(kMetricsPort)},
              {"prometheus.io/path", "/metrics"}};
}

Json metrics_container_port() {
  return Json{{"name", "metrics"}, {"containerPort", kMetricsPort}, {"protocol", "TCP"}};
}

int64_t drain_seconds(const InfraConfig& infra) {
  // SIGKILL follows SIGTERM after the grace period; leave 15 s for hand-back, flush and exit.
  return std::max<int64_t>(5, infra.grace_seconds - 15);
}

Json security_context(bool ipc_lock) {
  Json caps{{"drop", Json::array({"ALL"})}};
  // EFA registers (pins) memory; IPC_LOCK lets it exceed the default memlock limit.
  if (ipc_lock) caps["add"] = Json::array({"IPC_LOCK"});
  return Json{{"allowPrivilegeEscalation", false}, {"privileged", false}, {"capabilities", caps}};
}

Json pod_security_context(int64_t uid) {
  return Json{{"runAsNonRoot", true},
              {"runAsUser", uid},
              {"runAsGroup", uid},
              {"fsGroup", uid},
              {"seccompProfile", Json{{"type", "RuntimeDefault"}}}};
}

}  // namespace moerl::deploy
