// `moerl env`: the environment variables moerl reads, and their current values.
#include <cstdio>
#include <string>

#include "base/env.h"
#include "cli/command.h"

namespace moerl::cli {

static int run_env(Args& args) {
  args.finish();
  for (const auto& v : env::known_variables()) {
    auto cur = env::get(v.name);
    // NOTE: secrets (keys, tokens) are reported as set, never printed.
    std::string name = v.name;
    bool secret = name.find("SECRET") != std::string::npos || name.find("TOKEN") != std::string::npos ||
                  name.find("PASSWORD") != std::string::npos;
    std::string shown = !cur ? "(unset)" : secret && name.find("_FILE") == std::string::npos ? "(set)" : *cur;
    std::printf("%-22s %-12s %s\n", v.name, shown.c_str(), v.meaning);
  }
  return 0;
}

MOERL_COMMAND("env", "list the environment variables moerl reads", run_env);

}  // namespace moerl::cli
