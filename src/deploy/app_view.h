// The few keys of the job config (APP.toml, the file `moerl train` takes) that deployment
// needs. Read raw and leniently: sections owned by other parts are neither validated nor
// rejected here; `moerl trainer` / `moerl rollout` validate the whole file when they start.
//
//   AppView app = load_app_view("app.toml");
//   app.ep_size; app.rollout_ep_size; app.store_uri; app.text  // text: verbatim, for the ConfigMap
// Plain data; not shared between threads.
#pragma once

#include <cstdint>
#include <string>

namespace moerl::deploy {

struct AppView {
  std::string source;     // file name, for messages
  std::string text;       // the file verbatim (goes into the ConfigMap unchanged)
  std::string name;       // run name: [run] name / top-level name, else the file stem
  std::string queue;      // runtime.queue_url ("" = in-process default)
  std::string store_uri;  // [store] uri = "..." (a top-level `store = "..."` is read too)
  std::string store_key;  // which spelling held it ("store.uri" or "store")
  int64_t ep_size = 1;    // ep.size: ranks of the ONE trainer group (= training nodes x GPUs)
  std::string ep_backend; // ep.backend ("" = default, loopback: one rank only)
  int64_t num_experts = 0;  // model.num_experts (0 = not given; the job config's default applies)
  int64_t num_workers = 1;  // rollout.num_workers: rollout instances (Deployment replicas)
  int64_t rollout_ep_size = 1;  // rollout.ep_size: GPUs (ranks) of one rollout instance pod
};

AppView load_app_view(const std::string& file);
AppView parse_app_view(const std::string& text, const std::string& source_name);

}  // namespace moerl::deploy
