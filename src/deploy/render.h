// `moerl deploy render`: turns APP.toml + INFRA.toml into the files a platform engineer
// applies: an eksctl ClusterConfig, Kubernetes manifests (numbered in apply order), the IAM
// policy for the job's role, and a README with the commands. Validates first (see infra.h);
// renders nothing on invalid input.
//
//   Rendered r = render(load_infra("infra.toml"), load_app_view("app.toml"), {});
//   write_rendered(r, "out/");   // out/eksctl-cluster.yaml, out/k8s/*.yaml, out/iam-policy.json
// Pure until write_rendered; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "deploy/app_view.h"
#include "deploy/infra.h"
#include "deploy/yaml.h"

namespace moerl::deploy {

struct RenderOptions {
  // Redis password written into the rendered Secret; empty = 32 random hex characters.
  std::string redis_password;
};

struct RenderedFile {
  std::string path;     // relative to the output directory
  std::string content;
  bool secret = false;  // written with mode 0600
};

struct Rendered {
  std::vector<RenderedFile> files;
  const RenderedFile* find(const std::string& path) const;
};

Rendered render(const InfraConfig& infra, const AppView& app, const RenderOptions& options);
// Writes every file under out_dir (created if absent); existing files are replaced.
void write_rendered(const Rendered& rendered, const std::string& out_dir);

// The pieces, for tests and for render() itself.
Json render_cluster_config(const InfraConfig& infra, const AppView& app);
Json render_iam_policy(const InfraConfig& infra, const AppView& app);
std::vector<Json> render_base(const InfraConfig& infra, const AppView& app);  // Namespace, SA, ConfigMap
Json render_redis_secret(const InfraConfig& infra, const AppView& app, const std::string& password);
// StorageClass, Service, NetworkPolicy (only the job's trainer and rollout pods reach Redis),
// StatefulSet.
std::vector<Json> render_redis(const InfraConfig& infra, const AppView& app);
std::vector<Json> render_efa_device_plugin(const InfraConfig& infra);
std::vector<Json> render_trainer(const InfraConfig& infra, const AppView& app);
std::vector<Json> render_rollout(const InfraConfig& infra, const AppView& app);

}  // namespace moerl::deploy
