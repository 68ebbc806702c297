// INFRA.toml loading (strict, through base/config) and validation against the job config.
#include "deploy/infra.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "base/config.h"
#include "base/error.h"
#include "deploy/infra_checks.h"

namespace moerl::deploy {

using detail::dns1123_label;
using detail::fail;

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
    if (ro.has("gpus_per_worker")) {
      throw Error("config: rollout.gpus_per_worker is no longer read: a rollout pod is one instance of APP "
                  "rollout.ep_size GPUs",
                  "remove it, and set [rollout] ep_size in APP.toml (default 1; it must divide a rollout node's GPUs)");
    }
    c.grace_seconds = ro.integer("grace_seconds", 90, {.min = 1, .max = 3600});
    c.rollout_shm_gib = ro.integer("shm_gib", 16, {.min = 1, .max = 4096});
    c.autoscale_metric = ro.string("autoscale_metric", "");
    c.autoscale_target = ro.integer("autoscale_target", 8, {.min = 1, .max = 1 << 20});
    ro.done();

    ConfigTable rd = root.table("redis");
    c.redis_memory_gib = rd.integer("memory_gib", 32, {.min = 1, .max = 24576});
    c.redis_volume_gib = rd.integer("volume_gib", 100, {.min = 1, .max = 65536});
    c.redis_appendfsync = rd.choice("appendfsync", c.redis_appendfsync, {"always", "everysec"});
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

int64_t training_gpus_per_node(const InfraConfig& c) { return c.training.smallest.gpus; }

int64_t training_gpus_total(const InfraConfig& c) { return c.training.desired * training_gpus_per_node(c); }

}  // namespace moerl::deploy
