// The `moerl` binary: dispatches to registered subcommands and turns errors into one
// paragraph on stderr and a non-zero exit code (2 bad input, 3 timeout, 1 otherwise). Errors
// from libtorch are printed without their C++ backtrace; running out of device memory gets a hint.
#include <c10/util/Exception.h>

#include <cstdio>
#include <iostream>
#include <map>

#include "base/error.h"
#include "cli/command.h"

namespace moerl::cli {

static std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}
void register_command(Command command) { registry().push_back(std::move(command)); }
const std::vector<Command>& commands() { return registry(); }

static void usage() {
  std::map<std::string, std::string> sorted;
  for (const auto& c : commands()) sorted[c.name] = c.summary;
  std::fprintf(stderr, "usage: moerl COMMAND [options]\n\ncommands:\n");
  for (const auto& [name, summary] : sorted) std::fprintf(stderr, "  %-12s %s\n", name.c_str(), summary.c_str());
  std::fprintf(stderr, "\n`moerl COMMAND --help` describes one command.\n");
}

static int exit_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidInput:
    case ErrorCode::kNotFound: return 2;
    case ErrorCode::kTimeout: return 3;
    default: return 1;
  }
}

}  // namespace moerl::cli

int main(int argc, char** argv) {
  using namespace moerl::cli;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage();
    return argc < 2 ? 2 : 0;
  }
  std::string name = argv[1];
  for (const auto& c : commands()) {
    if (c.name != name) continue;
    Args args(name, std::vector<std::string>(argv + 2, argv + argc));
    try {
      return c.run(args);
    } catch (const moerl::Error& e) {
      std::fprintf(stderr, "moerl %s: error (%s): %s\n", name.c_str(), moerl::error_code_name(e.code()), e.what());
      return exit_code(e.code());
    } catch (const c10::OutOfMemoryError& e) {
      std::fprintf(stderr,
                   "moerl %s: error: %s\n  hint: the work does not fit the device's memory: lower the batch, "
                   "prompt or answer length (or the layers of a benchmark), or use a device with more memory\n",
                   name.c_str(), e.what_without_backtrace());
      return 1;
    } catch (const c10::Error& e) {
      std::fprintf(stderr, "moerl %s: error: %s\n", name.c_str(), e.what_without_backtrace());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "moerl %s: error: %s\n", name.c_str(), e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "moerl: unknown command '%s'\n", name.c_str());
  usage();
  return 2;
}
