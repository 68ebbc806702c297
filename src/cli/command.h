// Subcommand registry for the `moerl` binary. Each subcommand lives in its own
// cli/cmd_<name>.cc and registers itself; parts keep the logic, cli/ only parses flags.
//
//   static int run_forward(Args& args) { ... return 0; }
//   MOERL_COMMAND("forward", "logits of a model for token ids", run_forward);
#pragma once

#include <string>
#include <vector>

#include "cli/args.h"

namespace moerl::cli {

struct Command {
  std::string name;
  std::string summary;
  int (*run)(Args& args);
};

void register_command(Command command);
const std::vector<Command>& commands();

}  // namespace moerl::cli

#define MOERL_COMMAND(name, summary, fn) \
  static const bool moerl_registered_##fn = (::moerl::cli::register_command({name, summary, fn}), true)
