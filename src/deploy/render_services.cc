// Everything around the two roles: Namespace, ServiceAccount (IRSA / Pod Identity),
// ConfigMap with the app config, Redis (Secret, StorageClass, headless Service, NetworkPolicy,
// StatefulSet with AOF on a volume), the EFA device plugin DaemonSet, and the IAM policy.
#include "deploy/pod_spec.h"
#include "deploy/render.h"

namespace moerl::deploy {

namespace {

std::string store_prefix(const InfraConfig& infra, const AppView& app) {
  if (!infra.prefix.empty()) return infra.prefix;
  std::string rest = app.store_uri.substr(5);  // validated: s3://bucket[/prefix]
  auto slash = rest.find('/');
  std::string p = slash == std::string::npos ? "" : rest.substr(slash + 1);
  while (!p.empty() && p.back() == '/') p.pop_back();
  return p;
}

// Only the job's trainer and rollout pods (same namespace, same instance label) reach Redis,
// and only on its port.
Json redis_network_policy(const InfraConfig& infra, const AppView& app, const Json& redis_selector) {
  Json job = labels(app, "");
  job.erase("app.kubernetes.io/component");
  Json clients{{"matchLabels", job},
               {"matchExpressions", Json::array({Json{{"key", "app.kubernetes.io/component"},
                                                      {"operator", "In"},
                                                      {"values", Json::array({"trainer", "rollout"})}}})}};
  return Json{{"apiVersion", "networking.k8s.io/v1"},
              {"kind", "NetworkPolicy"},
              {"metadata", metadata(infra, app, kRedisName, "redis")},
              {"spec", Json{{"podSelector", Json{{"matchLabels", redis_selector}}},
                            {"policyTypes", Json::array({"Ingress"})},
                            {"ingress", Json::array({Json{{"from", Json::array({Json{{"podSelector", clients}}})},
                                                          {"ports", Json::array({Json{{"protocol", "TCP"}, {"port", kRedisPort}}})}}})}}}};
}

// redis-server reads `requirepass` from stdin (config file "-"), fed by a here-document, a
// pipe in dash: the password is on no argv and in no file. "$@" are the flags that follow.
constexpr const char* kRedisStart = "exec redis-server - \"$@\" <<EOF\nrequirepass $REDISCLI_AUTH\nEOF\n";

}  // namespace

std::vector<Json> render_base(const InfraConfig& infra, const AppView& app) {
  Json ns{{"apiVersion", "v1"},
          {"kind", "Namespace"},
          {"metadata", Json{{"name", infra.namespace_}, {"labels", labels(app, "namespace")}}}};
  Json sa{{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", metadata(infra, app, infra.service_account, "identity")}};
  if (infra.iam_mode == IamMode::kIrsa) {
    // The EKS pod identity webhook injects AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE.
    sa["metadata"]["annotations"] = Json{{"eks.amazonaws.com/role-arn", infra.role_arn},
                                         {"eks.amazonaws.com/sts-regional-endpoints", "true"}};
  }
  // Pod Identity: the association lives in the eksctl config (iam.podIdentityAssociations).
  sa["automountServiceAccountToken"] = false;
  Json cm{{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", metadata(infra, app, kAppConfigMap, "config")},
          {"data", Json{{"app.toml", app.text}}}};
  return {ns, sa, cm};
}

Json render_redis_secret(const InfraConfig& infra, const AppView& app, const std::string& password) {
  return Json{{"apiVersion", "v1"},
              {"kind", "Secret"},
              {"metadata", metadata(infra, app, kRedisName, "redis")},
              {"type", "Opaque"},
              {"stringData", Json{{kRedisSecretKey, password}}}};
}

std::vector<Json> render_redis(const InfraConfig& infra, const AppView& app) {
  std::vector<Json> out;
  if (infra.storage_class == "moerl-gp3") {
    out.push_back(Json{{"apiVersion", "storage.k8s.io/v1"},
                       {"kind", "StorageClass"},
                       {"metadata", Json{{"name", "moerl-gp3"}, {"labels", labels(app, "storage")}}},
                       {"provisioner", "ebs.csi.aws.com"},
                       {"parameters", Json{{"type", "gp3"}, {"encrypted", "true"}}},
                       {"reclaimPolicy", "Retain"},
                       {"volumeBindingMode", "WaitForFirstConsumer"},
                       {"allowVolumeExpansion", true}});
  }
  Json sel = Json{{"app.kubernetes.io/name", "moerl"}, {"app.kubernetes.io/component", "redis"}};
  out.push_back(Json{{"apiVersion", "v1"},
                     {"kind", "Service"},
                     {"metadata", metadata(infra, app, kRedisName, "redis")},
                     {"spec", Json{{"clusterIP", "None"},
                                   {"selector", sel},
                                   {"ports", Json::array({Json{{"name", "redis"}, {"port", kRedisPort},
                                                               {"targetPort", kRedisPort}, {"protocol", "TCP"}}})}}}});
  out.push_back(redis_network_policy(infra, app, sel));
  const int64_t mem_mib = infra.redis_memory_gib * 1024;
  const int64_t maxmemory_mib = mem_mib * 3 / 4;  // headroom for the AOF rewrite fork and buffers
  const InstanceType& bt = infra.buffer.smallest;
  const int64_t cpu_milli = std::max<int64_t>(1000, std::min<int64_t>(4000, (bt.vcpus - 1) * 1000));
  std::string secret = infra.redis_password_secret.empty() ? kRedisName : infra.redis_password_secret;
  Json container{
      {"name", "redis"},
      {"image", infra.image_redis},
      {"command", Json::array({"sh", "-c", kRedisStart, "redis-server", "--port", std::to_string(kRedisPort), "--dir",
                               "/data", "--appendonly", "yes", "--appendfsync", infra.redis_appendfsync, "--save", "",
                               "--maxmemory", std::to_string(maxmemory_mib) + "mb", "--maxmemory-policy", "noeviction"})},
      // REDISCLI_AUTH is how redis-cli (the readiness probe) takes a password off its argv.
      {"env", Json::array({Json{{"name", "REDISCLI_AUTH"},
                                {"valueFrom", Json{{"secretKeyRef", Json{{"name", secret}, {"key", kRedisSecretKey}}}}}}})},
      {"ports", Json::array({Json{{"name", "redis"}, {"containerPort", kRedisPort}, {"protocol", "TCP"}}})},
      {"resources", resources(cpu_milli, mem_mib, 0, 0, 0)},
      {"readinessProbe",
       Json{{"exec", Json{{"command", Json::array({"sh", "-c", "redis-cli ping | grep -q PONG"})}}},
            {"periodSeconds", 5},
            {"timeoutSeconds", 3}}},
      {"volumeMounts", Json::array({Json{{"name", "data"}, {"mountPath", "/data"}}})},
      {"securityContext", security_context(false)}};
  Json pod_spec{{"securityContext", pod_security_context(kRedisUid)},
                {"enableServiceLinks", false},
                {"automountServiceAccountToken", false},
                {"terminationGracePeriodSeconds", 60},
                {"containers", Json::array({container})}};
  place_on(pod_spec, infra.buffer, false);
  Json pvc{{"metadata", Json{{"name", "data"}}},
           {"spec", Json{{"accessModes", Json::array({"ReadWriteOnce"})},
                         {"storageClassName", infra.storage_class},
                         {"resources", Json{{"requests", Json{{"storage", std::to_string(infra.redis_volume_gib) + "Gi"}}}}}}}};
  out.push_back(Json{{"apiVersion", "apps/v1"},
                     {"kind", "StatefulSet"},
                     {"metadata", metadata(infra, app, kRedisName, "redis")},
                     {"spec", Json{{"serviceName", kRedisName},
                                   {"replicas", 1},
                                   {"selector", Json{{"matchLabels", sel}}},
                                   {"template", Json{{"metadata", Json{{"labels", labels(app, "redis")}}}, {"spec", pod_spec}}},
                                   {"volumeClaimTemplates", Json::array({pvc})}}}});
  return out;
}

std::vector<Json> render_efa_device_plugin(const InfraConfig& infra) {
  // Same name and namespace as the plugin eksctl installs for efaEnabled groups, so applying
  // this updates that one object instead of adding a second plugin for the same devices.
  Json sel{{"name", "aws-efa-k8s-device-plugin"}};
  Json groups = Json::array();
  for (const NodeGroup* g : {&infra.training, &infra.rollout}) {
    if (g->efa_interfaces > 0) groups.push_back(g->key);
  }
  Json container{
      {"name", "aws-efa-k8s-device-plugin"},
      {"image", infra.image_efa_plugin},
      {"securityContext", Json{{"allowPrivilegeEscalation", false}, {"capabilities", Json{{"drop", Json::array({"ALL"})}}}}},
      {"resources", Json{{"requests", Json{{"cpu", "10m"}, {"memory", "20Mi"}}}, {"limits", Json{{"memory", "100Mi"}}}}},
      {"volumeMounts", Json::array({Json{{"name", "device-plugin"}, {"mountPath", "/var/lib/kubelet/device-plugins"}},
                                    Json{{"name", "infiniband-volume"}, {"mountPath", "/dev/infiniband"}}})}};
  // NOTE: runs as root: it serves a socket in the kubelet's root-owned device-plugins dir.
  Json pod_spec{
      {"securityContext", Json{{"seccompProfile", Json{{"type", "RuntimeDefault"}}}}},
      {"hostNetwork", true},
      {"priorityClassName", "system-node-critical"},
      {"tolerations", Json::array({Json{{"operator", "Exists"}}})},
      {"affinity",
       Json{{"nodeAffinity",
             Json{{"requiredDuringSchedulingIgnoredDuringExecution",
                   Json{{"nodeSelectorTerms",
                         Json::array({Json{{"matchExpressions",
                                            Json::array({Json{{"key", kNodeGroupLabel}, {"operator", "In"}, {"values", groups}}})}}})}}}}}}},
      {"containers", Json::array({container})},
      {"volumes", Json::array({Json{{"name", "device-plugin"}, {"hostPath", Json{{"path", "/var/lib/kubelet/device-plugins"}}}},
                               Json{{"name", "infiniband-volume"}, {"hostPath", Json{{"path", "/dev/infiniband/"}}}}})}};
  Json ds{{"apiVersion", "apps/v1"},
          {"kind", "DaemonSet"},
          {"metadata", Json{{"name", "aws-efa-k8s-device-plugin-daemonset"}, {"namespace", "kube-system"}}},
          {"spec", Json{{"selector", Json{{"matchLabels", sel}}},
                        {"updateStrategy", Json{{"type", "RollingUpdate"}}},
                        {"template", Json{{"metadata", Json{{"labels", sel}}}, {"spec", pod_spec}}}}}};
  return {ds};
}

Json render_iam_policy(const InfraConfig& infra, const AppView& app) {
  const std::string prefix = store_prefix(infra, app);
  const std::string bucket_arn = "arn:aws:s3:::" + infra.bucket;
  const std::string objects = bucket_arn + "/" + (prefix.empty() ? "" : prefix + "/") + "*";
  Json list{{"Sid", "ListJobPrefix"}, {"Effect", "Allow"}, {"Action", Json::array({"s3:ListBucket"})}, {"Resource", bucket_arn}};
  if (!prefix.empty()) {
    list["Condition"] = Json{{"StringLike", Json{{"s3:prefix", Json::array({prefix, prefix + "/*"})}}}};
  }
  // NOTE: no s3:ListBucketMultipartUploads: S3 puts no s3:prefix in that action's request
  // context, so it could only be granted on the whole bucket. The checkpoint janitor finds
  // its unfinished uploads through upload markers under the prefix instead (listed with
  // ListBucket above; docs/formats/store_commit.md, "Upload markers"). Uploads no marker
  // names are left to the bucket's AbortIncompleteMultipartUpload lifecycle rule
  // (docs/deploy-security.md). Nothing calls ListParts, so s3:ListMultipartUploadParts is out.
  return Json{{"Version", "2012-10-17"},
              {"Statement", Json::array({list, Json{{"Sid", "ReadWriteJobObjects"},
                                                    {"Effect", "Allow"},
                                                    {"Action", Json::array({"s3:GetObject", "s3:PutObject",
                                                                            "s3:DeleteObject", "s3:AbortMultipartUpload"})},
                                                    {"Resource", objects}}})}};
}

}  // namespace moerl::deploy
