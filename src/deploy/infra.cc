// INFRA.toml loading (strict, through base/config) and validation against the job config.
#include "deploy/infra.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "base/config.h"
#include "base/error.h"

namespace moerl::deploy {

namespace {

std::string join(const std::vector<std::string>& xs) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + xs[i];
  return s;
}

// Node-group defaults per role; the role decides what kind of instance makes sense.
struct GroupDefaults {
  bool gpu;
  bool allow_spot;
  bool spot;
  int64_t volume_gib;
};

NodeGroup read_group(ConfigTable& groups, const std::string& key, const GroupDefaults& d) {
  NodeGroup g;
  g.key = key;
  ConfigTable t = groups.table(key);
  const std::string path = "node_groups." + key;
  if (t.has("instance_type") && t.has("instance_types")) {
    throw Error("config: " + path + " has both instance_type and instance_types",
                "use instance_type for one type, instance_types = [...] for several (Spot)");
  }
  if (t.has("instance_types")) {
    g.instance_types = t.strings("instance_types", {});
  } else {
    g.instance_types = {t.required_string("instance_type")};
  }
  if (g.instance_types.empty()) {
    throw Error("config: " + path + ".instance_types is empty", "list at least one instance type");
  }
  if (t.has("count") && (t.has("min") || t.has("max"))) {
    throw Error("config: " + path + " has count and min/max", "use count for a fixed size, min/max/desired to scale");
  }
  if (t.has("count")) {
    int64_t n = t.integer("count", 1, {.min = 0, .max = 5000});
    g.min_size = g.max_size = g.desired = n;
  } else {
    g.min_size = t.integer("min", 0, {.min = 0, .max = 5000});
    g.max_size = t.integer("max", 1, {.min = 1, .max = 5000});
    g.desired = t.integer("desired", g.max_size, {.min = 0, .max = 5000});
  }
  std::string cap = t.choice("capacity", d.spot ? "spot" : "on-demand",
                             d.allow_spot ? std::vector<std::string>{"on-demand", "spot", "capacity-block"}
                                          : std::vector<std::string>{"on-demand", "capacity-block"});
  g.capacity = cap == "spot" ? Capacity::kSpot : cap == "capacity-block" ? Capacity::kCapacityBlock
                                                                         : Capacity::kOnDemand;
  g.capacity_reservation_id = t.string("capacity_reservation_id", "");
  g.efa_interfaces = t.integer("efa_interfaces", -1, {.min = -1, .max = 64});
  g.availability_zones = t.strings("availability_zones", {});
  g.volume_gib = t.integer("volume_gib", d.volume_gib, {.min = 20, .max = 16384});
  g.placement_group = t.string("placement_group", "");
  t.done();
  return g;
}

std::string next_zone(const std::string& az) {
  if (az.empty()) return az;
  std::string z = az;
  z.back() = static_cast<char>(z.back() == 'z' ? 'a' : z.back() + 1);
  return z;
}

[[noreturn]] void fail(const InfraConfig& c, const std::string& field, const std::string& what,
                       const std::string& hint) {
  throw Error("INFRA " + c.source + ": " + field + " " + what, hint);
}

bool dns1123_label(const std::string& s) {
  static const std::regex re("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
  return s.size() <= 63 && std::regex_match(s, re);
}

// Resolves instance facts and EFA defaults of one group; role-independent checks.
void check_group(const InfraConfig& c, NodeGroup& g, bool gpu, int64_t default_efa_fraction_all) {
  const std::string path = "node_groups." + g.key;
  const InstanceType* smallest = nullptr;
  const std::string type_field = path + (g.instance_types.size() > 1 ? ".instance_types" : ".instance_type");
  for (const auto& name : g.instance_types) {
    const InstanceType* t = find_instance_type(name);
    if (t == nullptr) {
      fail(c, type_field,
           "= \"" + name + "\" is not a known instance type",
           "known types: " + instance_type_names(gpu) + " (add a row to src/deploy/instance_types.cc)");
    }
    if (gpu && t->gpus == 0) {
      fail(c, type_field, "= \"" + name + "\" has no GPU, but the " + g.key + " role needs GPUs",
           "choose a GPU type: " + instance_type_names(true));
    }
    if (smallest == nullptr || t->gpus < smallest->gpus ||
        (t->gpus == smallest->gpus && t->memory_gib < smallest->memory_gib)) {
      smallest = t;
    }
  }
  // Pods may ask for no more than the least of each resource across the group's types.
  g.smallest = *smallest;
  for (const auto& name : g.instance_types) {
    const InstanceType* t = find_instance_type(name);
    g.smallest.vcpus = std::min(g.smallest.vcpus, t->vcpus);
    g.smallest.memory_gib = std::min(g.smallest.memory_gib, t->memory_gib);
    g.smallest.efa_interfaces = std::min(g.smallest.efa_interfaces, t->efa_interfaces);
  }
  if (g.capacity == Capacity::kSpot && g.instance_types.size() < 2) {
    // Allowed, but a single type makes Spot capacity fragile; not an error.
  }
  if (g.capacity != Capacity::kSpot && g.instance_types.size() > 1) {
    fail(c, path + ".instance_types", "lists " + std::to_string(g.instance_types.size()) +
                                          " types for a non-Spot group",
         "on-demand and capacity-block groups take one instance_type");
  }
  if (g.capacity == Capacity::kCapacityBlock) {
    static const std::regex cr("^cr-[0-9a-f]{8,17}$");
    if (!std::regex_match(g.capacity_reservation_id, cr)) {
      fail(c, path + ".capacity_reservation_id",
           "= \"" + g.capacity_reservation_id + "\" is not a capacity reservation id",
           "capacity = \"capacity-block\" needs the block's id, e.g. \"cr-0123456789abcdef0\"");
    }
  } else if (!g.capacity_reservation_id.empty()) {
    fail(c, path + ".capacity_reservation_id", "is set but capacity is not \"capacity-block\"",
         "set capacity = \"capacity-block\" or remove the id");
  }
  // EFA: default all of the instance's interfaces when asked to, else off.
  int64_t max_efa = 1 << 30;
  for (const auto& name : g.instance_types) max_efa = std::min<int64_t>(max_efa, find_instance_type(name)->efa_interfaces);
  if (g.efa_interfaces < 0) g.efa_interfaces = default_efa_fraction_all ? max_efa : 0;
  if (g.efa_interfaces > 0 && max_efa == 0) {
    std::string without;
    for (const auto& name : g.instance_types) {
      if (find_instance_type(name)->efa_interfaces == 0) without += (without.empty() ? "" : ", ") + name;
    }
    fail(c, path + ".efa_interfaces",
         "= " + std::to_string(g.efa_interfaces) + " but " + without + " has no EFA",
         "set efa_interfaces = 0, or use an EFA-capable type (p4d, p5, p5e, p5en, p6-b200, g5/g6 8xlarge+)");
  }
  if (g.efa_interfaces > max_efa) {
    fail(c, path + ".efa_interfaces",
         "= " + std::to_string(g.efa_interfaces) + " exceeds the " + std::to_string(max_efa) +
             " EFA interfaces of " + join(g.instance_types),
         "use at most " + std::to_string(max_efa));
  }
  if (g.availability_zones.empty()) {
    if (g.efa_interfaces > 0 || g.capacity == Capacity::kCapacityBlock) g.availability_zones = {c.availability_zone};
  }
  for (const auto& z : g.availability_zones) {
    if (std::find(c.cluster_zones.begin(), c.cluster_zones.end(), z) == c.cluster_zones.end()) {
      fail(c, path + ".availability_zones", "contains \"" + z + "\", not one of the cluster's zones (" +
                                                join(c.cluster_zones) + ")",
           "add it to cluster.availability_zones or pick one of those");
    }
  }
  if (g.efa_interfaces > 0 && g.availability_zones.size() != 1) {
    fail(c, path + ".availability_zones",
         "= [" + join(g.availability_zones) + "] spans " + std::to_string(g.availability_zones.size()) +
             " zones, but an EFA node group must live in exactly one availability zone",
         "EFA traffic does not cross zones and eksctl's efaEnabled needs one AZ; list one zone");
  }
  if (!(g.min_size <= g.desired && g.desired <= g.max_size)) {
    fail(c, path, "min=" + std::to_string(g.min_size) + " desired=" + std::to_string(g.desired) +
                      " max=" + std::to_string(g.max_size) + " is not ordered min <= desired <= max",
         "fix the sizes");
  }
}

}  // namespace

const char* launcher_name(Launcher l) {
  switch (l) {
    case Launcher::kPyTorchJob: return "pytorchjob";
    case Launcher::kJobSet: return "jobset";
    case Launcher::kIndexedJob: return "indexed-job";
  }
  return "?";
}

InfraConfig parse_infra(const std::string& text, const std::string& source_name) {
  InfraConfig c;
  c.source = source_name;
  try {
    ConfigDoc doc = ConfigDoc::parse(text, source_name);
    ConfigTable root = doc.root();
    ConfigTable cl = root.table("cluster");
    c.cluster_name = cl.required_string("name");
    c.region = cl.required_string("region");
    c.availability_zone = cl.required_string("availability_zone");
    c.cluster_zones = cl.strings("availability_zones", {c.availability_zone, next_zone(c.availability_zone)});
    c.kubernetes_version = cl.string("kubernetes_version", "1.31");
    c.namespace_ = cl.string("namespace", "moerl");
    cl.done();

    ConfigTable im = root.table("images");
    c.image_gpu = im.required_string("gpu");
    c.image_cpu = im.required_string("cpu");
    c.image_redis = im.string("redis", "public.ecr.aws/docker/library/redis:7.2-bookworm");
    c.image_efa_plugin = im.string(
        "efa_device_plugin", "602401143452.dkr.ecr." + c.region + ".amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.6");
    im.done();

    ConfigTable s3 = root.table("s3");
    c.bucket = s3.string("bucket", "");
    c.prefix = s3.string("prefix", "");
    s3.done();

    ConfigTable iam = root.table("iam");
    c.iam_mode = iam.choice("mode", "irsa", {"irsa", "pod-identity"}) == "irsa" ? IamMode::kIrsa : IamMode::kPodIdentity;
    c.role_arn = iam.string("role_arn", "");
    c.service_account = iam.string("service_account", "moerl");
    iam.done();

    ConfigTable tr = root.table("trainer");
    std::string l = tr.choice("launcher", "pytorchjob", {"pytorchjob", "jobset", "indexed-job"});
    c.launcher = l == "pytorchjob" ? Launcher::kPyTorchJob : l == "jobset" ? Launcher::kJobSet : Launcher::kIndexedJob;
    c.hugepages_2mi_mib = tr.integer("hugepages_2mi_mib", 5120, {.min = 0, .max = 1 << 20});
    c.trainer_shm_gib = tr.integer("shm_gib", 64, {.min = 1, .max = 4096});
    c.trainer_backoff_limit = tr.integer("backoff_limit", 3, {.min = 0, .max = 100});
    c.efa_plugin = tr.choice("efa_device_plugin", "daemonset", {"daemonset", "eksctl"}) == "daemonset"
                       ? EfaPlugin::kDaemonSet
                       : EfaPlugin::kEksctl;
    tr.done();

    ConfigTable ro = root.table("rollout");
    c.gpus_per_worker = ro.integer("gpus_per_worker", 0, {.min = 0, .max = 64});
    c.grace_seconds = ro.integer("grace_seconds", 90, {.min = 1, .max = 3600});
    c.rollout_shm_gib = ro.integer("shm_gib", 16, {.min = 1, .max = 4096});
    c.autoscale_metric = ro.string("autoscale_metric", "");
    c.autoscale_target = ro.integer("autoscale_target", 8, {.min = 1, .max = 1 << 20});
    ro.done();

    ConfigTable rd = root.table("redis");
    c.redis_memory_gib = rd.integer("memory_gib", 32, {.min = 1, .max = 24576});
    c.redis_volume_gib = rd.integer("volume_gib", 100, {.min = 1, .max = 65536});
    c.redis_appendfsync = rd.choice("appendfsync", "everysec", {"everysec", "always"});
    c.redis_password_secret = rd.string("password_secret", "");
    c.storage_class = rd.string("storage_class", "moerl-gp3");
    rd.done();

    ConfigTable ng = root.table("node_groups");
    c.training = read_group(ng, "training", {.gpu = true, .allow_spot = false, .spot = false, .volume_gib = 1024});
    c.rollout = read_group(ng, "rollout", {.gpu = true, .allow_spot = true, .spot = true, .volume_gib = 512});
    c.services = read_group(ng, "services", {.gpu = false, .allow_spot = true, .spot = false, .volume_gib = 100});
    c.buffer = read_group(ng, "buffer", {.gpu = false, .allow_spot = false, .spot = false, .volume_gib = 100});
    ng.done();
    root.done();
  } catch (const Error& e) {
    std::string m = e.message();
    if (m.rfind("config: ", 0) == 0) m = m.substr(8);
    throw Error("INFRA " + source_name + ": " + m, e.hint(), e.code());
  }
  // Instance facts, EFA defaults and per-group checks need the cluster zones: do them here.
  check_group(c, c.training, true, 1);
  check_group(c, c.rollout, true, 0);
  check_group(c, c.services, false, 0);
  check_group(c, c.buffer, false, 0);
  return c;
}

InfraConfig load_infra(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw Error("INFRA: cannot read '" + file + "'", "check the --infra path", ErrorCode::kNotFound);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_infra(ss.str(), file);
}

int64_t training_gpus_total(const InfraConfig& c) { return c.training.desired * c.training.smallest.gpus; }

int64_t rollout_gpus_per_worker(const InfraConfig& c) {
  return c.gpus_per_worker > 0 ? c.gpus_per_worker : c.rollout.smallest.gpus;
}

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
  // Training: whole nodes, EP groups tile the GPUs.
  const NodeGroup& tr = c.training;
  if (tr.desired < 1) fail(c, "node_groups.training.count", "= 0", "the trainer needs at least one node");
  if (tr.min_size != tr.max_size) {
    fail(c, "node_groups.training", "scales (min != max)", "the trainer is one gang of fixed size: use count = N");
  }
  const int64_t gpn = tr.smallest.gpus, total = training_gpus_total(c), ep = app.ep_size;
  if (total % ep != 0 || (ep > gpn ? ep % gpn != 0 : gpn % ep != 0)) {
    fail(c, "node_groups.training.count",
         "= " + std::to_string(tr.desired) + " nodes x " + std::to_string(gpn) + " GPUs (" + tr.instance_types[0] +
             ") = " + std::to_string(total) + " GPUs does not divide into EP groups of APP ep.size = " +
             std::to_string(ep),
         "ep.size must divide the GPUs of one node or be a multiple of it, and divide the total; e.g. ep.size = " +
             std::to_string(gpn));
  }
  if (ep > gpn && tr.efa_interfaces == 0) {
    fail(c, "node_groups.training.efa_interfaces",
         "= 0 but APP ep.size = " + std::to_string(ep) + " spans " + std::to_string(ep / gpn) + " nodes",
         "the EP data plane between nodes runs over EFA: enable it or keep ep.size <= " + std::to_string(gpn));
  }
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
  const int64_t gpw = rollout_gpus_per_worker(c);
  if (gpw > ro.smallest.gpus) {
    fail(c, "rollout.gpus_per_worker", "= " + std::to_string(gpw) + " exceeds the " + std::to_string(ro.smallest.gpus) +
                                           " GPUs of " + ro.smallest.name,
         "lower it or use larger instance types");
  }
  const int64_t per_node = ro.smallest.gpus / gpw;
  if (app.num_workers > ro.max_size * per_node) {
    fail(c, "node_groups.rollout.max",
         "= " + std::to_string(ro.max_size) + " nodes hold " + std::to_string(ro.max_size * per_node) +
             " workers of " + std::to_string(gpw) + " GPU(s), but APP rollout.num_workers = " +
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
