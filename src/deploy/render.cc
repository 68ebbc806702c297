// Assembles the rendered file set and writes it. Validation happens before anything renders.
#include "deploy/render.h"

#include <fstream>

#include "base/error.h"
#include "base/files.h"
#include "deploy/pod_spec.h"

namespace moerl::deploy {

namespace {

std::string random_password() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  unsigned char buf[16];
  if (!in.read(reinterpret_cast<char*>(buf), sizeof buf)) {
    throw Error("deploy: cannot read /dev/urandom for the Redis password", "pass a password explicitly",
                ErrorCode::kIo);
  }
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (unsigned char b : buf) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

std::string readme(const InfraConfig& infra, const AppView& app, bool efa_daemonset, bool has_efa) {
  std::string r;
  r += "# moerl deployment for job '" + app.name + "' on EKS cluster '" + infra.cluster_name + "' (" + infra.region + ")\n\n";
  r += "Rendered by `moerl deploy render`; see docs/deploy-eks.md for the whole path.\n\n";
  r += "1. IAM policy for the job's role (S3 access to s3://" + infra.bucket + " only):\n";
  r += "   aws iam create-policy --policy-name " + infra.cluster_name + "-moerl-s3 --policy-document file://iam-policy.json\n";
  r += "   then attach it to " + infra.role_arn + "\n";
  r += "2. Cluster and node groups:  eksctl create cluster -f eksctl-cluster.yaml\n";
  r += std::string("3. Trainer operator: ") +
       (infra.launcher == Launcher::kPyTorchJob ? "install the Kubeflow training operator (PyTorchJob CRD)\n"
        : infra.launcher == Launcher::kJobSet   ? "install the JobSet controller (jobset.x-k8s.io CRD)\n"
                                                : "none needed (Indexed Job + headless Service are core kinds)\n");
  r += "4. Manifests, in order:       kubectl apply -f k8s/\n";
  r += "\nTrainer: one group of APP ep.size = " + std::to_string(app.ep_size) + " ranks, " +
       std::to_string(infra.training.desired) + " node pod(s) x " + std::to_string(training_gpus_per_node(infra)) +
       " (each: moerl launch --nproc-per-node " + std::to_string(training_gpus_per_node(infra)) +
       " -- moerl trainer ...).\nRollout: " + std::to_string(app.num_workers) + " instance pod(s) of APP rollout.ep_size = " +
       std::to_string(app.rollout_ep_size) + " GPU(s).\n";
  if (has_efa && !efa_daemonset) {
    r += "\nNOTE: no EFA device plugin manifest was rendered (trainer.efa_device_plugin = \"eksctl\"):\n"
         "eksctl installs the aws-efa-k8s-device-plugin DaemonSet for efaEnabled node groups.\n";
  } else if (has_efa) {
    r += "\nNOTE: k8s/20-efa-device-plugin.yaml has the same name as the plugin eksctl installs for\n"
         "efaEnabled groups, so applying it updates that DaemonSet; there is never a second plugin.\n";
  }
  r += "\nCheck EFA: kubectl logs -n " + infra.namespace_ + " " +
       (infra.launcher == Launcher::kPyTorchJob ? std::string(kTrainerName) + "-master-0" : std::string("<trainer pod>")) +
       " | grep 'NET/OFI Selected Provider is efa'\n";
  return r;
}

}  // namespace

const RenderedFile* Rendered::find(const std::string& path) const {
  for (const auto& f : files) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

Rendered render(const InfraConfig& infra, const AppView& app, const RenderOptions& options) {
  validate_infra(infra, app);
  Rendered r;
  r.files.push_back({"eksctl-cluster.yaml", to_yaml(render_cluster_config(infra, app)), false});
  r.files.push_back({"iam-policy.json", render_iam_policy(infra, app).dump(2) + "\n", false});
  r.files.push_back({"k8s/00-base.yaml", to_yaml_stream(render_base(infra, app)), false});
  if (infra.redis_password_secret.empty()) {
    std::string pw = options.redis_password.empty() ? random_password() : options.redis_password;
    r.files.push_back({"k8s/01-redis-secret.yaml", to_yaml_stream({render_redis_secret(infra, app, pw)}), true});
  }
  r.files.push_back({"k8s/10-redis.yaml", to_yaml_stream(render_redis(infra, app)), false});
  const bool has_efa = infra.training.efa_interfaces > 0 || infra.rollout.efa_interfaces > 0;
  const bool efa_daemonset = infra.efa_plugin == EfaPlugin::kDaemonSet;
  if (has_efa && efa_daemonset) {
    r.files.push_back({"k8s/20-efa-device-plugin.yaml", to_yaml_stream(render_efa_device_plugin(infra)), false});
  }
  r.files.push_back({"k8s/30-trainer.yaml", to_yaml_stream(render_trainer(infra, app)), false});
  r.files.push_back({"k8s/40-rollout.yaml", to_yaml_stream(render_rollout(infra, app)), false});
  r.files.push_back({"README.md", readme(infra, app, efa_daemonset, has_efa), false});
  return r;
}

void write_rendered(const Rendered& rendered, const std::string& out_dir) {
  for (const auto& f : rendered.files) {
    write_file_atomic(out_dir + "/" + f.path, f.content,
                      {.mode = static_cast<mode_t>(f.secret ? 0600 : 0644), .parent_dirs = ParentDirs::kCreate});
  }
}

}  // namespace moerl::deploy
