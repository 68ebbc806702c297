// Reads the deployment-relevant keys of APP.toml with toml++ directly (no ConfigTable::done:
// the other sections belong to other parts).
#include "deploy/app_view.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "base/error.h"

namespace moerl::deploy {

namespace {

[[noreturn]] void bad(const AppView& a, const std::string& key, const std::string& what,
                      const std::string& hint) {
  throw Error("APP " + a.source + ": " + key + " " + what, hint);
}

std::string get_string(const AppView& a, const toml::table& root, const std::string& path) {
  const toml::node_view<const toml::node> n = root.at_path(path);
  if (!n) return "";
  if (auto s = n.value_exact<std::string>()) return *s;
  bad(a, path, "is not a string", "quote the value: " + path + " = \"...\"");
}

int64_t get_int(const AppView& a, const toml::table& root, const std::string& path, int64_t fallback) {
  const toml::node_view<const toml::node> n = root.at_path(path);
  if (!n) return fallback;
  if (auto i = n.value_exact<int64_t>()) return *i;
  bad(a, path, "is not an integer", "write a whole number without quotes");
}

}  // namespace

AppView parse_app_view(const std::string& text, const std::string& source_name) {
  AppView a;
  a.source = source_name;
  a.text = text;
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << "APP " << source_name << ":" << e.source().begin.line << ":" << e.source().begin.column
       << ": " << e.description();
    throw Error(os.str(), "the file must be valid TOML (https://toml.io)");
  }
  a.name = get_string(a, root, "run.name");
  if (a.name.empty()) a.name = get_string(a, root, "name");
  if (a.name.empty()) {
    // "examples/deploy/small/app.toml" names the job after its folder, "job.toml" after itself.
    std::filesystem::path p(source_name);
    a.name = p.stem() == "app" && p.has_parent_path() ? p.parent_path().filename().string() : p.stem().string();
  }
  a.queue = get_string(a, root, "runtime.queue_url");
  if (get_string(a, root, "runtime.weight_transport") == "shared") {
    bad(a, "runtime.weight_transport", "= \"shared\" reaches only rollout workers on the trainer's host",
        "the cluster runs the trainer and the rollout instances in separate pods: remove the key (versions then "
        "go through the store)");
  }
  if (auto* st = root.get("store")) {
    if (st->is_string()) {
      a.store_uri = *st->value<std::string>();
      a.store_key = "store";
    } else if (st->is_table()) {
      a.store_uri = get_string(a, root, "store.uri");
      a.store_key = "store.uri";
    } else {
      bad(a, "store", "is neither a string nor a table", "write [store] uri = \"s3://bucket/prefix\"");
    }
  }
  a.ep_size = get_int(a, root, "ep.size", 1);
  if (a.ep_size < 1) bad(a, "ep.size", "= " + std::to_string(a.ep_size) + " must be >= 1", "set ep.size to 1, 2, 4, 8, ...");
  a.ep_backend = get_string(a, root, "ep.backend");
  a.num_experts = get_int(a, root, "model.num_experts", 0);
  a.num_workers = get_int(a, root, "rollout.num_workers", 1);
  if (a.num_workers < 1) {
    bad(a, "rollout.num_workers", "= " + std::to_string(a.num_workers) + " must be >= 1",
        "the cluster runs that many rollout instance pods");
  }
  a.rollout_ep_size = get_int(a, root, "rollout.ep_size", 1);
  if (a.rollout_ep_size < 1) {
    bad(a, "rollout.ep_size", "= " + std::to_string(a.rollout_ep_size) + " must be >= 1",
        "the GPUs of one rollout instance: 1, 2, 4 or 8");
  }
  return a;
}

AppView load_app_view(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw Error("APP: cannot read '" + file + "'", "check the --app path", ErrorCode::kNotFound);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_app_view(ss.str(), file);
}

}  // namespace moerl::deploy
