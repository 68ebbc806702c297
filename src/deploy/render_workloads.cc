// The two roles. The trainer is ONE group, a gang of node pods on on-demand (or capacity-block)
// EFA nodes: a Kubeflow PyTorchJob, a JobSet, or an Indexed Job + headless Service, each pod
// `moerl launch --nproc-per-node <GPUs>` with the node rank, node count and master in its env.
// Rollout instances (one pod of APP rollout.ep_size GPUs each) are a separate Deployment on
// the Spot group with a PodDisruptionBudget and scaling bounds; they share no gang with the
// trainer, so a Spot eviction can never restart training.
#include <algorithm>

#include "deploy/pod_spec.h"
#include "deploy/render.h"

namespace moerl::deploy {

namespace {

Json trainer_pod_template(const InfraConfig& infra, const AppView& app, const std::string& container_name,
                          const Json& extra_env, const std::string& restart_policy, const std::string& subdomain) {
  const NodeGroup& g = infra.training;
  const InstanceType& t = g.smallest;
  const bool efa = g.efa_interfaces > 0;
  const int64_t hugepages = efa ? infra.hugepages_2mi_mib : 0;
  // The pod owns the whole node: leave ~10% CPU and ~15% memory to kubelet and daemons.
  const int64_t cpu_milli = static_cast<int64_t>(t.vcpus) * 900;
  const int64_t mem_mib = static_cast<int64_t>(t.memory_gib) * 1024 * 85 / 100 - hugepages;
  Json env = role_env(infra, efa);
  for (const auto& e : extra_env) env.push_back(e);
  Json container{{"name", container_name},
                 {"image", infra.image_gpu},
                 {"command", pod_command(role_argv(infra, "trainer"), t.gpus, kTrainerGraceSeconds)},
                 {"env", env},
                 {"ports", Json::array({Json{{"name", "rendezvous"}, {"containerPort", kRendezvousPort}, {"protocol", "TCP"}},
                                        metrics_container_port()})},
                 {"resources", resources(cpu_milli, mem_mib, t.gpus, g.efa_interfaces, hugepages)},
                 {"volumeMounts", volume_mounts(true)},
                 {"securityContext", security_context(efa)}};
  Json spec{{"serviceAccountName", infra.service_account},
            {"enableServiceLinks", false},
            {"securityContext", pod_security_context(kImageUid)},
            {"terminationGracePeriodSeconds", kTrainerGraceSeconds},
            {"containers", Json::array({container})},
            {"volumes", Json::array({app_config_volume(), shm_volume(infra.trainer_shm_gib)})}};
  if (!restart_policy.empty()) spec["restartPolicy"] = restart_policy;
  if (!subdomain.empty()) spec["subdomain"] = subdomain;
  place_on(spec, g, /*on_demand_only=*/true);
  return Json{{"metadata", Json{{"labels", labels(app, "trainer")}, {"annotations", scrape_annotations()}}}, {"spec", spec}};
}

Json rank_from_completion_index() {
  return Json{{"name", "RANK"},
              {"valueFrom", Json{{"fieldRef", Json{{"fieldPath", "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}}}};
}

std::vector<Json> pytorchjob(const InfraConfig& infra, const AppView& app) {
  const int64_t nodes = infra.training.desired;
  // The operator injects MASTER_ADDR=<job>-master-0, MASTER_PORT, WORLD_SIZE (= nodes, as
  // nprocPerNode is "1": one launcher per pod starts the node's ranks), RANK (= node rank:
  // Master 0, Worker i -> i + 1) and PET_NNODES / PET_NODE_RANK / PET_MASTER_ADDR / _PORT,
  // which `moerl launch` reads. The container must be named "pytorch" for the port defaulting.
  Json tmpl = trainer_pod_template(infra, app, "pytorch", Json::array(), "", "");
  tmpl["spec"]["containers"][0]["ports"][0]["name"] = "pytorchjob-port";
  Json replicas{{"Master", Json{{"replicas", 1}, {"restartPolicy", "OnFailure"}, {"template", tmpl}}}};
  if (nodes > 1) replicas["Worker"] = Json{{"replicas", nodes - 1}, {"restartPolicy", "OnFailure"}, {"template", tmpl}};
  Json job{{"apiVersion", "kubeflow.org/v1"},
           {"kind", "PyTorchJob"},
           {"metadata", metadata(infra, app, kTrainerName, "trainer")},
           {"spec", Json{{"nprocPerNode", "1"},
                         {"runPolicy", Json{{"cleanPodPolicy", "None"},
                                            {"backoffLimit", infra.trainer_backoff_limit},
                                            {"schedulingPolicy", Json{{"minAvailable", nodes}}}}},
                         {"pytorchReplicaSpecs", replicas}}}};
  return {job};
}

std::vector<Json> jobset(const InfraConfig& infra, const AppView& app) {
  const int64_t nodes = infra.training.desired;
  const std::string subdomain = kTrainerName;
  // Pods are <jobset>-<replicatedJob>-<jobIdx>-<podIdx>.<subdomain>; the node-level rendezvous
  // `moerl launch` reads: WORLD_SIZE = nodes, RANK = node rank = completion index.
  Json env = Json::array({Json{{"name", "MASTER_ADDR"}, {"value", std::string(kTrainerName) + "-node-0-0." + subdomain}},
                          Json{{"name", "MASTER_PORT"}, {"value", std::to_string(kRendezvousPort)}},
                          Json{{"name", "WORLD_SIZE"}, {"value", std::to_string(nodes)}},
                          rank_from_completion_index()});
  Json tmpl = trainer_pod_template(infra, app, "trainer", env, "Never", "");
  Json job_template{{"spec", Json{{"parallelism", nodes},
                                  {"completions", nodes},
                                  {"completionMode", "Indexed"},
                                  {"backoffLimit", 0},
                                  {"template", tmpl}}}};
  Json js{{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
          {"kind", "JobSet"},
          {"metadata", metadata(infra, app, kTrainerName, "trainer")},
          {"spec", Json{{"network", Json{{"enableDNSHostnames", true}, {"subdomain", subdomain}, {"publishNotReadyAddresses", true}}},
                        {"failurePolicy", Json{{"maxRestarts", infra.trainer_backoff_limit}}},
                        {"successPolicy", Json{{"operator", "All"}}},
                        {"replicatedJobs", Json::array({Json{{"name", "node"}, {"replicas", 1}, {"template", job_template}}})}}}};
  return {js};
}

std::vector<Json> indexed_job(const InfraConfig& infra, const AppView& app) {
  const int64_t nodes = infra.training.desired;
  const std::string svc = kTrainerName;
  Json sel{{"app.kubernetes.io/name", "moerl"}, {"app.kubernetes.io/component", "trainer"}};
  Json service{{"apiVersion", "v1"},
               {"kind", "Service"},
               {"metadata", metadata(infra, app, svc, "trainer")},
               {"spec", Json{{"clusterIP", "None"},
                             {"publishNotReadyAddresses", true},
                             {"selector", sel},
                             {"ports", Json::array({Json{{"name", "rendezvous"}, {"port", kRendezvousPort},
                                                         {"targetPort", kRendezvousPort}, {"protocol", "TCP"}}})}}}};
  // Indexed Job pods are named <job>-<index> and, with subdomain set, resolve as
  // <job>-<index>.<service>.<namespace>.svc.cluster.local. Node-level rendezvous as for JobSet.
  Json env = Json::array({Json{{"name", "MASTER_ADDR"},
                               {"value", std::string(kTrainerName) + "-0." + svc + "." + infra.namespace_ + ".svc.cluster.local"}},
                          Json{{"name", "MASTER_PORT"}, {"value", std::to_string(kRendezvousPort)}},
                          Json{{"name", "WORLD_SIZE"}, {"value", std::to_string(nodes)}},
                          rank_from_completion_index()});
  Json tmpl = trainer_pod_template(infra, app, "trainer", env, "Never", svc);
  Json job{{"apiVersion", "batch/v1"},
           {"kind", "Job"},
           {"metadata", metadata(infra, app, kTrainerName, "trainer")},
           {"spec", Json{{"parallelism", nodes},
                         {"completions", nodes},
                         {"completionMode", "Indexed"},
                         {"backoffLimit", infra.trainer_backoff_limit},
                         {"template", tmpl}}}};
  return {service, job};
}

}  // namespace

std::vector<Json> render_trainer(const InfraConfig& infra, const AppView& app) {
  switch (infra.launcher) {
    case Launcher::kPyTorchJob: return pytorchjob(infra, app);
    case Launcher::kJobSet: return jobset(infra, app);
    case Launcher::kIndexedJob: return indexed_job(infra, app);
  }
  return {};
}

std::vector<Json> render_rollout(const InfraConfig& infra, const AppView& app) {
  const NodeGroup& g = infra.rollout;
  const InstanceType& t = g.smallest;
  const int64_t gpw = app.rollout_ep_size;  // GPUs (ranks) of one instance pod
  const int64_t per_node = t.gpus / gpw;
  const int64_t replicas = app.num_workers;
  const int64_t min_replicas = std::max<int64_t>(1, std::min<int64_t>(replicas, g.min_size * per_node));
  const int64_t max_replicas = std::max<int64_t>(replicas, g.max_size * per_node);
  const bool efa = g.efa_interfaces > 0;
  const int64_t cpu_milli = static_cast<int64_t>(t.vcpus) * 900 * gpw / t.gpus;
  const int64_t mem_mib = static_cast<int64_t>(t.memory_gib) * 1024 * 85 / 100 * gpw / t.gpus;
  const int64_t efa_per_worker = efa ? std::max<int64_t>(1, g.efa_interfaces * gpw / t.gpus) : 0;
  const int64_t hugepages = efa ? infra.hugepages_2mi_mib : 0;
  Json sel{{"app.kubernetes.io/name", "moerl"}, {"app.kubernetes.io/component", "rollout"}};
  Json container{{"name", "rollout"},
                 {"image", infra.image_gpu},
                 {"command", pod_command(role_argv(infra, "rollout"), gpw > 1 ? gpw : 0, infra.grace_seconds)},
                 {"env", role_env(infra, efa)},
                 {"ports", Json::array({metrics_container_port()})},
                 {"resources", resources(cpu_milli, mem_mib - hugepages, gpw, efa_per_worker, hugepages)},
                 {"volumeMounts", volume_mounts(true)},
                 {"securityContext", security_context(efa)}};
  // SIGTERM (node drain on a Spot notice, scale-down) starts the runtime's drain: stop
  // leasing, finish what fits, hand back the rest, flush, exit 0. The grace period stays
  // inside the two-minute Spot notice so the drain ends before the instance is reclaimed.
  Json spec{{"serviceAccountName", infra.service_account},
            {"enableServiceLinks", false},
            {"securityContext", pod_security_context(kImageUid)},
            {"terminationGracePeriodSeconds", infra.grace_seconds},
            {"containers", Json::array({container})},
            {"volumes", Json::array({app_config_volume(), shm_volume(infra.rollout_shm_gib)})}};
  place_on(spec, g, /*on_demand_only=*/false);
  Json meta = metadata(infra, app, kRolloutName, "rollout");
  meta["annotations"] = Json{{"moerl.io/replicas-min", std::to_string(min_replicas)},
                             {"moerl.io/replicas-max", std::to_string(max_replicas)}};
  const int64_t max_unavailable = std::max<int64_t>(1, replicas / 4);
  Json deployment{{"apiVersion", "apps/v1"},
                  {"kind", "Deployment"},
                  {"metadata", meta},
                  {"spec", Json{{"replicas", replicas},
                                {"selector", Json{{"matchLabels", sel}}},
                                {"strategy", Json{{"type", "RollingUpdate"},
                                                  {"rollingUpdate", Json{{"maxSurge", 0}, {"maxUnavailable", max_unavailable}}}}},
                                {"template", Json{{"metadata", Json{{"labels", labels(app, "rollout")},
                                                                    {"annotations", scrape_annotations()}}},
                                                  {"spec", spec}}}}}};
  Json pdb{{"apiVersion", "policy/v1"},
           {"kind", "PodDisruptionBudget"},
           {"metadata", metadata(infra, app, kRolloutName, "rollout")},
           {"spec", Json{{"maxUnavailable", max_unavailable}, {"selector", Json{{"matchLabels", sel}}}}}};
  std::vector<Json> out = {deployment, pdb};
  if (!infra.autoscale_metric.empty()) {
    out.push_back(Json{
        {"apiVersion", "autoscaling/v2"},
        {"kind", "HorizontalPodAutoscaler"},
        {"metadata", metadata(infra, app, kRolloutName, "rollout")},
        {"spec", Json{{"scaleTargetRef", Json{{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"name", kRolloutName}}},
                      {"minReplicas", min_replicas},
                      {"maxReplicas", max_replicas},
                      {"metrics", Json::array({Json{{"type", "External"},
                                                    {"external", Json{{"metric", Json{{"name", infra.autoscale_metric}}},
                                                                      {"target", Json{{"type", "AverageValue"},
                                                                                      {"averageValue", std::to_string(infra.autoscale_target)}}}}}}})},
                      {"behavior", Json{{"scaleDown", Json{{"stabilizationWindowSeconds", 300}}}}}}}});
  }
  return out;
}

}  // namespace moerl::deploy
