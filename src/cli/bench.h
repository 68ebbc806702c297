// Registry of `moerl bench <name>` benchmarks. Each lives in cli/cmd_bench_<name>.cc and
// registers itself; the `bench` command (cmd_bench.cc) dispatches on the first argument.
//
//   static int run_bench_store(Args& args) { ... }
//   MOERL_BENCH("store", "object store put/get throughput", run_bench_store);
#pragma once

#include <string>
#include <vector>

#include "cli/args.h"

namespace moerl::cli {

struct Bench {
  std::string name;
  std::string summary;
  int (*run)(Args& args);
};

void register_bench(Bench bench);
const std::vector<Bench>& benches();

}  // namespace moerl::cli

#define MOERL_BENCH(name, summary, fn) \
  static const bool moerl_bench_registered_##fn = (::moerl::cli::register_bench({name, summary, fn}), true)
