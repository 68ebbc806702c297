// Validation of an INFRA config against the job it will run (instance types, GPU counts,
// EP and worker sizes, names Kubernetes and AWS accept).
#include <algorithm>
#include <regex>

#include "base/error.h"
#include "deploy/infra.h"
#include "deploy/infra_checks.h"

namespace moerl::deploy {

using detail::dns1123_label;
using detail::fail;

namespace {

[[noreturn]] void app_fail(const AppView& app, const std::string& field, const std::string& what, const std::string& hint) {
  throw Error("APP " + app.source + ": " + field + " " + what, hint);
}

// The EP sizes against the model and the backend: the trainer group's ep.size and a rollout
// instance's rollout.ep_size each shard model.num_experts; loopback is one rank, cuda_ipc one
// node.
void check_app_ep(const AppView& app, int64_t training_nodes) {
  const std::string backend = app.ep_backend.empty() ? "loopback" : app.ep_backend;
  for (const auto& [key, size] : {std::pair<std::string, int64_t>{"ep.size", app.ep_size}, {"rollout.ep_size", app.rollout_ep_size}}) {
    if (app.num_experts > 0 && app.num_experts % size != 0) {
      app_fail(app, key, "= " + std::to_string(size) + " does not divide model.num_experts = " + std::to_string(app.num_experts),
               "each rank holds num_experts / " + key + " experts: choose a divisor of " + std::to_string(app.num_experts));
    }
    if (size > 1 && backend == "loopback") {
      app_fail(app, "ep.backend", "= \"" + backend + "\" runs one rank, but " + key + " = " + std::to_string(size),
               "set [ep] backend = \"nccl\" on GPUs (\"fabric\" on CPUs)");
    }
  }
  if (training_nodes > 1 && backend == "cuda_ipc") {
    app_fail(app, "ep.backend", "= \"cuda_ipc\" stays within one node, but the trainer group spans " +
                                    std::to_string(training_nodes) + " nodes",
             "use \"nccl\" (NCCL over EFA through aws-ofi-nccl)");
  }
}

}  // namespace

void validate_infra(const InfraConfig& c, const AppView& app) {
  static const std::regex cluster_re("^[a-zA-Z][-a-zA-Z0-9]{0,99}$");
  if (!std::regex_match(c.cluster_name, cluster_re)) {
    fail(c, "cluster.name", "= \"" + c.cluster_name + "\" is not a valid EKS cluster name",
         "start with a letter; letters, digits and '-' only; at most 100 characters");
  }
  if (!dns1123_label(c.namespace_)) {
    fail(c, "cluster.namespace", "= \"" + c.namespace_ + "\" is not a DNS-1123 label",
         "lower-case letters, digits and '-', at most 63 characters, e.g. \"moerl\"");
  }
  if (!dns1123_label(c.service_account)) {
    fail(c, "iam.service_account", "= \"" + c.service_account + "\" is not a DNS-1123 label", "e.g. \"moerl\"");
  }
  static const std::regex region_re("^[a-z]{2}(-gov)?-[a-z]+-[0-9]$");
  if (!std::regex_match(c.region, region_re)) {
    fail(c, "cluster.region", "= \"" + c.region + "\" is not an AWS region", "e.g. \"us-west-2\"");
  }
  for (const auto& z : c.cluster_zones) {
    if (z.rfind(c.region, 0) != 0 || z.size() != c.region.size() + 1) {
      fail(c, "cluster.availability_zones", "contains \"" + z + "\", not a zone of region " + c.region,
           "zones are the region plus a letter, e.g. \"" + c.region + "a\"");
    }
  }
  if (c.cluster_zones.size() < 2) {
    fail(c, "cluster.availability_zones", "lists " + std::to_string(c.cluster_zones.size()) + " zone",
         "EKS needs subnets in at least two zones; list two or more");
  }
  if (std::find(c.cluster_zones.begin(), c.cluster_zones.end(), c.availability_zone) == c.cluster_zones.end()) {
    fail(c, "cluster.availability_zone", "= \"" + c.availability_zone + "\" is not in cluster.availability_zones",
         "add it to the list");
  }
  // S3: the job's store must be this bucket (pods share nothing else).
  if (c.bucket.empty()) {
    fail(c, "s3.bucket", "is missing",
         "add [s3] bucket = \"my-bucket\": checkpoints and weight versions live there on EKS");
  }
  static const std::regex bucket_re("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$");
  if (!std::regex_match(c.bucket, bucket_re)) {
    fail(c, "s3.bucket", "= \"" + c.bucket + "\" is not a valid S3 bucket name",
         "3-63 lower-case letters, digits, '.' and '-'");
  }
  const std::string store_key = app.store_key.empty() ? "store.uri" : app.store_key;
  if (app.store_uri.rfind("s3://", 0) != 0) {
    throw Error("APP " + app.source + ": " + store_key + " = \"" + app.store_uri +
                    "\" is not an s3:// URI; pods on different nodes share no local directory",
                "set [store] uri = \"s3://" + c.bucket + "/" + (c.prefix.empty() ? app.name : c.prefix) + "\"");
  }
  std::string rest = app.store_uri.substr(5);
  std::string app_bucket = rest.substr(0, rest.find('/'));
  std::string app_prefix = rest.find('/') == std::string::npos ? "" : rest.substr(rest.find('/') + 1);
  if (app_bucket != c.bucket) {
    fail(c, "s3.bucket", "= \"" + c.bucket + "\" but APP " + store_key + " = \"" + app.store_uri + "\" uses bucket \"" +
                             app_bucket + "\"",
         "the IAM policy grants only s3.bucket; make the two agree");
  }
  if (!c.prefix.empty() && app_prefix.rfind(c.prefix, 0) != 0) {
    fail(c, "s3.prefix", "= \"" + c.prefix + "\" does not contain APP " + store_key + " = \"" + app.store_uri + "\"",
         "the IAM policy grants only s3.prefix; make the store live under it");
  }
  static const std::regex arn_re("^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+$");
  if (!std::regex_match(c.role_arn, arn_re)) {
    fail(c, "iam.role_arn", "= \"" + c.role_arn + "\" is not an IAM role ARN",
         "create the role with the rendered iam-policy.json and give its ARN, e.g. "
         "\"arn:aws:iam::123456789012:role/moerl-job\"");
  }
  // Training: ONE trainer group over every GPU of the training nodes: expert parallel over
  // all of its ranks, data parallel for the dense weights (EP sub-groups with replicated
  // experts are not built), one `moerl launch --nproc-per-node <GPUs>` per node pod.
  const NodeGroup& tr = c.training;
  if (tr.desired < 1) fail(c, "node_groups.training.count", "= 0", "the trainer needs at least one node");
  if (tr.min_size != tr.max_size) {
    fail(c, "node_groups.training", "scales (min != max)", "the trainer is one gang of fixed size: use count = N");
  }
  const int64_t gpn = training_gpus_per_node(c), nodes = tr.desired, total = training_gpus_total(c), ep = app.ep_size;
  if (ep != total) {
    std::string fix = "set APP [ep] size = " + std::to_string(total);
    if (ep % gpn == 0) fix += ", or node_groups.training.count = " + std::to_string(ep / gpn);
    fail(c, "node_groups.training.count",
         "= " + std::to_string(nodes) + " nodes x " + std::to_string(gpn) + " GPUs (" + tr.instance_types[0] + ") = " +
             std::to_string(total) + " trainer ranks, but APP ep.size = " + std::to_string(ep) +
             ": the trainer is one group of ep.size ranks, one per GPU of the training nodes",
         fix + " (EP sub-groups with replicated experts are not built)");
  }
  if (nodes > 1 && tr.efa_interfaces == 0) {
    fail(c, "node_groups.training.efa_interfaces",
         "= 0 but the trainer group (APP ep.size = " + std::to_string(ep) + ") spans " + std::to_string(nodes) + " nodes",
         "the EP data plane between nodes runs over EFA: enable it or use one node");
  }
  check_app_ep(app, nodes);
  if (tr.efa_interfaces > 0 && c.hugepages_2mi_mib <= 0) {
    fail(c, "trainer.hugepages_2mi_mib", "= 0 with EFA enabled", "libfabric's EFA provider needs 2 MiB hugepages");
  }
  if (c.hugepages_2mi_mib % 2 != 0) {
    fail(c, "trainer.hugepages_2mi_mib", "= " + std::to_string(c.hugepages_2mi_mib) + " is not a multiple of 2",
         "hugepages come in 2 MiB pages");
  }
  // Rollout: Spot-safe workers.
  const NodeGroup& ro = c.rollout;
  if (ro.capacity == Capacity::kSpot && c.grace_seconds >= 120) {
    fail(c, "rollout.grace_seconds", "= " + std::to_string(c.grace_seconds) + " is not inside the two-minute Spot notice",
         "keep it <= ~90 s so the drain finishes before the instance is reclaimed");
  }
  // Each rollout pod is one instance of APP rollout.ep_size GPUs; instances tile the nodes.
  const int64_t m = app.rollout_ep_size;
  for (const auto& name : ro.instance_types) {
    const InstanceType* t = find_instance_type(name);
    if (t->gpus % m != 0) {
      fail(c, ro.instance_types.size() > 1 ? "node_groups.rollout.instance_types" : "node_groups.rollout.instance_type",
           "has " + name + " with " + std::to_string(t->gpus) + " GPUs, which APP rollout.ep_size = " +
               std::to_string(m) + " does not divide (each rollout pod is one instance of rollout.ep_size GPUs)",
           "set APP rollout.ep_size to a divisor of " + std::to_string(t->gpus) +
               ", or use instance types whose GPU count it divides");
    }
  }
  const int64_t per_node = ro.smallest.gpus / m;
  if (app.num_workers > ro.max_size * per_node) {
    fail(c, "node_groups.rollout.max",
         "= " + std::to_string(ro.max_size) + " nodes hold " + std::to_string(ro.max_size * per_node) +
             " rollout instances of " + std::to_string(m) + " GPU(s), but APP rollout.num_workers = " +
             std::to_string(app.num_workers),
         "raise node_groups.rollout.max or lower rollout.num_workers");
  }
  if (!c.autoscale_metric.empty()) {
    static const std::regex metric_re("^[a-zA-Z_:][a-zA-Z0-9_:]*$");
    if (!std::regex_match(c.autoscale_metric, metric_re)) {
      fail(c, "rollout.autoscale_metric", "= \"" + c.autoscale_metric + "\" is not a metric name",
           "e.g. \"moerl_task_queue_depth\"");
    }
  }
  for (const NodeGroup* g : {&c.services, &c.buffer}) {
    if (g->desired < 1 && g->max_size < 1) {
      fail(c, "node_groups." + g->key, "has no nodes", "give it count >= 1");
    }
  }
  const InstanceType& bt = c.buffer.smallest;
  if (c.redis_memory_gib > bt.memory_gib * 9 / 10) {
    fail(c, "redis.memory_gib", "= " + std::to_string(c.redis_memory_gib) + " does not fit " + bt.name + " (" +
                                    std::to_string(bt.memory_gib) + " GiB)",
         "use a larger node_groups.buffer.instance_type (memory-optimised r7i/r6i) or less memory");
  }
  if (!c.redis_password_secret.empty() && !dns1123_label(c.redis_password_secret)) {
    fail(c, "redis.password_secret", "is not a DNS-1123 name", "name an existing Secret in the namespace");
  }
}

}  // namespace moerl::deploy
