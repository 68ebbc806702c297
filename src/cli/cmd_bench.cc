// `moerl bench NAME [options]`: dispatches to the benchmarks registered with MOERL_BENCH.
#include <cstdio>
#include <map>

#include "base/error.h"
#include "cli/bench.h"
#include "cli/command.h"

namespace moerl::cli {

static std::vector<Bench>& bench_registry() {
  static std::vector<Bench> r;
  return r;
}
void register_bench(Bench bench) { bench_registry().push_back(std::move(bench)); }
const std::vector<Bench>& benches() { return bench_registry(); }

static std::string bench_list() {
  std::map<std::string, std::string> sorted;
  for (const auto& b : benches()) sorted[b.name] = b.summary;
  std::string s;
  for (const auto& [name, summary] : sorted) s += "  " + name + "  " + summary + "\n";
  return s;
}

static int run_bench(Args& args) {
  std::vector<std::string> tokens = args.unused();
  if (tokens.empty() || tokens[0] == "--help" || tokens[0] == "-h") {
    std::printf("usage: moerl bench NAME [options]   (`moerl bench NAME --help`)\nbenchmarks:\n%s", bench_list().c_str());
    return tokens.empty() ? 2 : 0;
  }
  for (const auto& b : benches()) {
    if (b.name != tokens[0]) continue;
    std::vector<std::string> argv(tokens.begin() + 1, tokens.end());
    if (!args.rest().empty()) {
      argv.push_back("--");
      argv.insert(argv.end(), args.rest().begin(), args.rest().end());
    }
    Args sub("bench " + b.name, argv);
    return b.run(sub);
  }
  throw Error("moerl bench: unknown benchmark '" + tokens[0] + "'", "one of:\n" + bench_list());
}

MOERL_COMMAND("bench", "benchmarks (moerl bench ep, ...)", run_bench);

}  // namespace moerl::cli
