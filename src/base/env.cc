#include "base/env.h"

#include <cstdlib>

#include "base/error.h"

namespace moerl::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::string get_or(const char* name, const std::string& fallback) {
  return get(name).value_or(fallback);
}

long get_int_or(const char* name, long fallback) {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0') {
    throw Error("environment variable " + std::string(name) + "='" + *v + "' is not an integer",
                "unset it or give a whole number");
  }
  return x;
}

static std::optional<std::string> first_of(const char* a, const char* b) {
  if (auto v = get(a)) return v;
  return get(b);
}

static int int_of(const char* a, const char* b, int fallback) {
  if (get(a)) return static_cast<int>(get_int_or(a, fallback));
  return static_cast<int>(get_int_or(b, fallback));
}

Rendezvous rendezvous() {
  Rendezvous r;
  if (auto v = first_of("MASTER_ADDR", "PET_MASTER_ADDR")) r.master_addr = *v;
  r.master_port = int_of("MASTER_PORT", "PET_MASTER_PORT", r.master_port);
  r.world_size = int_of("WORLD_SIZE", "PET_WORLD_SIZE", 1);
  r.rank = int_of("RANK", "PET_RANK", 0);
  r.local_rank = int_of("LOCAL_RANK", "PET_LOCAL_RANK", r.rank);
  if (r.world_size < 1 || r.rank < 0 || r.rank >= r.world_size) {
    throw Error("rendezvous: RANK=" + std::to_string(r.rank) + " WORLD_SIZE=" +
                    std::to_string(r.world_size) + " is not a valid rank/world pair",
                "RANK must be in [0, WORLD_SIZE); launch ranks with `moerl launch -n N`");
  }
  return r;
}

std::optional<long> local_world_size() {
  auto v = get("LOCAL_WORLD_SIZE");
  if (!v || v->empty()) return std::nullopt;
  return get_int_or("LOCAL_WORLD_SIZE", 0);
}

LaunchEnv launch_env() {
  auto either = [](const char* pet, const char* node_level) -> std::optional<EnvValue> {
    if (auto v = get(pet)) return EnvValue{*v, pet};
    if (auto v = get(node_level)) return EnvValue{*v, node_level};
    return std::nullopt;
  };
  LaunchEnv e;
  e.nnodes = either("PET_NNODES", "WORLD_SIZE");
  e.node_rank = either("PET_NODE_RANK", "RANK");
  e.master_addr = either("PET_MASTER_ADDR", "MASTER_ADDR");
  e.master_port = either("PET_MASTER_PORT", "MASTER_PORT");
  return e;
}

std::string tokenizer_data_dir(const std::string& fallback) { return get_or("MOERL_TOKENIZER_DATA", fallback); }

const std::vector<Known>& known_variables() {
  static const std::vector<Known> kVars = {
      {"MOERL_LOG_LEVEL", "debug|info|warn|error (default info)"},
      {"MOERL_PROGRESS", "progress display: bar|plain|off (default: bar on a terminal, else plain)"},
      {"MASTER_ADDR", "rendezvous host (PET_MASTER_ADDR also read)"},
      {"MASTER_PORT", "rendezvous TCPStore port (PET_MASTER_PORT also read)"},
      {"WORLD_SIZE", "number of ranks (to `moerl launch --nproc-per-node`: number of nodes, unless PET_NNODES)"},
      {"RANK", "this process's rank (to `moerl launch --nproc-per-node`: the node rank, unless PET_NODE_RANK)"},
      {"LOCAL_RANK", "rank within the node"},
      {"LOCAL_WORLD_SIZE", "ranks on this node (set by `moerl launch`); EP backend hierarchical groups ranks r / LOCAL_WORLD_SIZE as nodes"},
      {"GROUP_RANK", "node rank (set by `moerl launch`)"},
      {"PET_NNODES", "Kubeflow: number of nodes, read by `moerl launch --nproc-per-node` (before WORLD_SIZE)"},
      {"PET_NODE_RANK", "Kubeflow: this node's rank, read by `moerl launch --nproc-per-node` (before RANK)"},
      {"FI_PROVIDER", "libfabric provider for the EP fabric transport (shm, tcp, efa)"},
      {"AWS_ENDPOINT_URL_S3", "S3 endpoint override (then AWS_ENDPOINT_URL)"},
      {"AWS_REGION", "S3 region (then AWS_DEFAULT_REGION)"},
      {"AWS_DEFAULT_REGION", "S3 region when AWS_REGION is unset (default us-east-1)"},
      {"AWS_ENDPOINT_URL", "endpoint override for S3 and STS when no service-specific one is set"},
      {"AWS_ENDPOINT_URL_STS", "STS endpoint for web identity (default https://sts.REGION.amazonaws.com)"},
      {"AWS_ACCESS_KEY_ID", "S3 credentials, first in the chain (with AWS_SECRET_ACCESS_KEY)"},
      {"AWS_SECRET_ACCESS_KEY", "S3 secret key (secret: never printed)"},
      {"AWS_SESSION_TOKEN", "S3 session token for temporary keys (secret: never printed)"},
      {"AWS_ROLE_ARN", "web identity (EKS IRSA): role to assume via STS"},
      {"AWS_WEB_IDENTITY_TOKEN_FILE", "web identity (EKS IRSA): token file"},
      {"AWS_ROLE_SESSION_NAME", "web identity session name (default moerl-TIME)"},
      {"AWS_CONTAINER_CREDENTIALS_FULL_URI", "container credentials URL (EKS Pod Identity, ECS)"},
      {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "ECS task credentials path on 169.254.170.2"},
      {"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "container credentials: file with the Authorization token"},
      {"AWS_CONTAINER_AUTHORIZATION_TOKEN", "container credentials token (secret: never printed)"},
      {"AWS_SHARED_CREDENTIALS_FILE", "shared credentials file (default $HOME/.aws/credentials)"},
      {"AWS_PROFILE", "profile in the shared credentials file (default 'default')"},
      {"AWS_EC2_METADATA_DISABLED", "true: skip instance metadata (IMDSv2) credentials"},
      {"AWS_EC2_METADATA_SERVICE_ENDPOINT", "IMDS address (default http://169.254.169.254)"},
      {"HOME", "home directory (for ~/.aws/credentials)"},
      {"MOERL_REDIS_PASSWORD", "Redis password when runtime.queue_password_file and the URL hold none (secret: never printed)"},
      {"POD_NAME", "rollout worker id prefix (the manifests set it from metadata.name; default: the hostname)"},
      {"OMP_NUM_THREADS", "intra-op threads for CPU tensor math"},
      {"MOERL_TOKENIZER_DATA", "tests: directory of real tokenizer files <name>/tokenizer.json (default tools/tokenizers/data)"},
  };
  return kVars;
}

}  // namespace moerl::env
