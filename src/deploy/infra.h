// INFRA.toml: where and on what a moerl job runs on EKS (cluster, node groups, images, S3
// bucket, IAM). Loaded strictly (unknown keys are errors) and validated in one place; every
// error names the field ("INFRA node_groups.training.instance_type = ...") and has a HINT.
//
//   InfraConfig infra = load_infra("infra.toml");
//   validate_infra(infra, app);   // cross-checks against the job (EP size, workers, store)
// Plain data; not shared between threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deploy/app_view.h"
#include "deploy/instance_types.h"

namespace moerl::deploy {

enum class Capacity { kOnDemand, kCapacityBlock, kSpot };
enum class Launcher { kPyTorchJob, kJobSet, kIndexedJob };
enum class IamMode { kIrsa, kPodIdentity };
enum class EfaPlugin { kDaemonSet, kEksctl };

struct NodeGroup {
  std::string key;                       // "training", "rollout", "services", "buffer"
  std::vector<std::string> instance_types;  // one for on-demand groups, several for Spot
  int64_t min_size = 0;
  int64_t max_size = 0;
  int64_t desired = 0;
  Capacity capacity = Capacity::kOnDemand;
  std::string capacity_reservation_id;   // capacity blocks only
  int64_t efa_interfaces = 0;            // per node; 0 = EFA off
  std::vector<std::string> availability_zones;  // empty = any of the cluster's
  int64_t volume_gib = 200;
  std::string placement_group;           // existing group name; "" = eksctl's own
  // The smallest instance of the group (Spot groups mix types): what pods may request.
  InstanceType smallest{};
};

struct InfraConfig {
  std::string source;  // file name, for messages
  // [cluster]
  std::string cluster_name, region, availability_zone, kubernetes_version, namespace_;
  std::vector<std::string> cluster_zones;
  // [images]
  std::string image_gpu, image_cpu, image_redis, image_efa_plugin;
  // [s3]
  std::string bucket, prefix;
  // [iam]
  IamMode iam_mode = IamMode::kIrsa;
  std::string role_arn, service_account;
  // [trainer]
  Launcher launcher = Launcher::kPyTorchJob;
  int64_t hugepages_2mi_mib = 5120;
  int64_t trainer_shm_gib = 64;
  int64_t trainer_backoff_limit = 3;
  std::string efa_provider_env = "efa";
  EfaPlugin efa_plugin = EfaPlugin::kDaemonSet;
  // [rollout] (a rollout pod's GPUs are APP rollout.ep_size, the one source of truth)
  int64_t grace_seconds = 90;
  int64_t rollout_shm_gib = 16;
  std::string autoscale_metric;  // "" = fixed replicas (no HPA)
  int64_t autoscale_target = 8;  // queue entries per worker
  // [redis]
  int64_t redis_memory_gib = 32;
  int64_t redis_volume_gib = 100;
  std::string redis_appendfsync = "always";  // or "everysec": up to 1 s of acked writes may be lost
  std::string redis_password_secret;  // existing Secret; "" = render one
  std::string storage_class = "moerl-gp3";
  // [node_groups.*]
  NodeGroup training, rollout, services, buffer;
};

InfraConfig load_infra(const std::string& file);
InfraConfig parse_infra(const std::string& text, const std::string& source_name);
// Cross-checks INFRA against the job; throws Error naming the field on the first problem.
void validate_infra(const InfraConfig& infra, const AppView& app);

// Derived sizes used by the renderer (and tests): the trainer group has one rank per GPU of
// the training nodes (= APP ep.size, validate_infra); a rollout instance pod has APP
// rollout.ep_size GPUs.
int64_t training_gpus_per_node(const InfraConfig& infra);
int64_t training_gpus_total(const InfraConfig& infra);

const char* launcher_name(Launcher l);

}  // namespace moerl::deploy
