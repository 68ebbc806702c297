// Building blocks shared by the rendered workloads: names, labels, node placement for a node
// group (selector + tolerations + capacity-type affinity), Guaranteed-QoS resources
// (requests == limits), the /dev/shm and app-config volumes, and the roles' commands and env.
// Pure functions of InfraConfig/AppView; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "deploy/app_view.h"
#include "deploy/infra.h"
#include "deploy/yaml.h"

namespace moerl::deploy {

// Object names (one job per namespace, so names are fixed).
inline constexpr const char* kTrainerName = "moerl-trainer";
inline constexpr const char* kRolloutName = "moerl-rollout";
inline constexpr const char* kRedisName = "moerl-redis";
inline constexpr const char* kRedisSecretKey = "password";
inline constexpr const char* kAppConfigMap = "moerl-app";
inline constexpr const char* kAppPath = "/etc/moerl/app.toml";
inline constexpr const char* kNodeGroupLabel = "moerl.io/node-group";
inline constexpr int kRedisPort = 6379;
inline constexpr int kRendezvousPort = 23456;  // Kubeflow's PyTorchJob default; global rank 0's TCPStore
inline constexpr int64_t kTrainerGraceSeconds = 120;  // the trainer pods' terminationGracePeriodSeconds
inline constexpr int kMetricsPort = 9400;      // every role's Prometheus /metrics ([metrics] prometheus_port)
inline constexpr int64_t kImageUid = 1000;     // USER of deploy/Dockerfile and Dockerfile.cpu
inline constexpr int64_t kRedisUid = 999;      // the redis image's redis user

Json labels(const AppView& app, const std::string& component);
Json metadata(const InfraConfig& infra, const AppView& app, const std::string& name, const std::string& component);
// nodeSelector + tolerations (+ capacity-type affinity) that pin a pod to one node group.
void place_on(Json& pod_spec, const NodeGroup& group, bool on_demand_only);
// requests == limits (Guaranteed QoS); zero-valued resources are left out.
Json resources(int64_t cpu_milli, int64_t memory_mib, int64_t gpus, int64_t efa, int64_t hugepages_2mi_mib);
Json shm_volume(int64_t gib);
Json app_config_volume();
Json volume_mounts(bool with_shm);
// The redis:// URL roles get: no password (that comes from MOERL_REDIS_PASSWORD, see role_env),
// so no argv and no config written to disk holds it.
std::string redis_url(const InfraConfig& infra);
// Environment shared by the GPU roles (pod name, region, the Redis password as
// MOERL_REDIS_PASSWORD from the Secret, libfabric provider, logging).
Json role_env(const InfraConfig& infra, bool efa);
// What each rank of a role runs: ["moerl", ROLE, kAppPath, "--set", "runtime.queue_url=...",
// "--set", "metrics.prometheus_port=<kMetricsPort>", ...]; rollout instances also get
// runtime.drain_seconds so the drain ends inside the grace period.
Json role_argv(const InfraConfig& infra, const std::string& role);
// The container's command: tini as PID 1 around the ranks of the pod. launch_ranks > 0:
// ["tini", "-g", "--", "moerl", "launch", "--nproc-per-node", N, "--grace", S, "--", role_argv...]
// (the launcher forms the ranks from the pod's rendezvous env and SIGKILLs them S seconds
// after forwarding SIGTERM, S = launcher_grace_seconds(pod_grace_seconds)); 0: ["tini", "-g",
// "--", role_argv...], one process.
Json pod_command(const Json& role_argv, int64_t launch_ranks, int64_t pod_grace_seconds);
// The pod's grace period less 5 s for the launcher to reap its ranks and exit before the
// kubelet's SIGKILL.
int64_t launcher_grace_seconds(int64_t pod_grace_seconds);
// Pod annotations that Prometheus' kubernetes-pods scrape config (and most charts) follow:
// prometheus.io/scrape, /port (kMetricsPort), /path; and the matching container port.
Json scrape_annotations();
Json metrics_container_port();
int64_t drain_seconds(const InfraConfig& infra);
// Container level: no privilege escalation, every capability dropped (IPC_LOCK kept for EFA).
Json security_context(bool ipc_lock);
// Pod level: runAsNonRoot as `uid` (user, group and fsGroup), seccomp RuntimeDefault.
Json pod_security_context(int64_t uid);

}  // namespace moerl::deploy
