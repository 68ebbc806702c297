// `moerl deploy`: render EKS / Kubernetes manifests from APP.toml + INFRA.toml, or list the
// instance types the renderer knows. The logic lives in src/deploy/.
#include <cstdio>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/command.h"
#include "deploy/render.h"

namespace moerl::cli {

static std::string need(const std::optional<std::string>& v, const char* flag) {
  if (!v) {
    throw Error(std::string("moerl deploy render: ") + flag + " is missing",
                "usage: moerl deploy render --app APP.toml --infra INFRA.toml --out DIR");
  }
  return *v;
}

static int run_deploy(Args& args) {
  auto app_file = args.value("--app");
  auto infra_file = args.value("--infra");
  auto out = args.value("--out");
  std::string password = args.value_or("--redis-password", "");
  bool json = args.flag("--json");
  std::string sub = args.positional(0, "SUBCOMMAND (render | instance-types)");
  args.finish();
  if (sub == "render") {
    deploy::RenderOptions opts;
    opts.redis_password = password;
    deploy::AppView app = deploy::load_app_view(need(app_file, "--app"));
    deploy::InfraConfig infra = deploy::load_infra(need(infra_file, "--infra"));
    deploy::Rendered r = deploy::render(infra, app, opts);
    const std::string dir = need(out, "--out");
    deploy::write_rendered(r, dir);
    for (const auto& f : r.files) std::printf("%s/%s\n", dir.c_str(), f.path.c_str());
    return 0;
  }
  if (sub == "instance-types") {
    if (json) {
      nlohmann::ordered_json all = nlohmann::ordered_json::object();
      for (const auto& t : deploy::instance_types()) {
        all[t.name] = {{"vcpus", t.vcpus}, {"memory_gib", t.memory_gib}, {"gpus", t.gpus},
                       {"gpu", t.gpu}, {"gpu_memory_gib", t.gpu_memory_gib}, {"efa_interfaces", t.efa_interfaces}};
      }
      std::printf("%s\n", all.dump(2).c_str());
    } else {
      std::printf("%-18s %5s %6s %4s %-5s %4s\n", "type", "vCPU", "GiB", "GPUs", "GPU", "EFA");
      for (const auto& t : deploy::instance_types()) {
        std::printf("%-18s %5d %6d %4d %-5s %4d\n", t.name, t.vcpus, t.memory_gib, t.gpus, t.gpu, t.efa_interfaces);
      }
    }
    return 0;
  }
  throw Error("moerl deploy: unknown subcommand '" + sub + "'",
              "use `moerl deploy render --app APP.toml --infra INFRA.toml --out DIR` or `moerl deploy instance-types [--json]`");
}

MOERL_COMMAND("deploy", "render EKS/Kubernetes manifests from APP.toml + INFRA.toml", run_deploy);

}  // namespace moerl::cli
