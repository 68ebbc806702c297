// `moerl env`: the environment variables moerl reads, and their current values.
#include <cstdio>

#include "base/env.h"
#include "cli/command.h"

namespace moerl::cli {

static int run_env(Args& args) {
  args.finish();
  for (const auto& v : env::known_variables()) {
    auto cur = env::get(v.name);
    std::printf("%-22s %-12s %s\n", v.name, cur ? cur->c_str() : "(unset)", v.meaning);
  }
  return 0;
}

MOERL_COMMAND("env", "list the environment variables moerl reads", run_env);

}  // namespace moerl::cli
