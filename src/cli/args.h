// Flag parser for subcommands, resolved lazily: a subcommand first asks for its flags
// (`--key value`, `--key=value`, boolean `--flag` or `-r`), then for positionals (the
// tokens no flag claimed), then calls finish(), which rejects anything left over.
// Everything after a literal `--` is rest() (for `moerl launch -n 2 -- CMD ...`).
//
//   std::string model = a.required("--model");
//   int64_t n = a.integer("--max-new-tokens", 16);
//   bool greedy = a.flag("--greedy");
//   std::string config = a.positional(0, "CONFIG.toml");
//   a.finish();
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moerl::cli {

class Args {
 public:
  Args(std::string command, std::vector<std::string> argv);

  bool flag(const std::string& name);
  std::optional<std::string> value(const std::string& name);
  std::string value_or(const std::string& name, const std::string& fallback);
  std::string required(const std::string& name);
  std::vector<std::string> values(const std::string& name);  // repeated flag, in order
  int64_t integer(const std::string& name, int64_t fallback);
  double number(const std::string& name, double fallback);
  // Tokens no flag has claimed, in order. Ask for flags first.
  std::vector<std::string> positionals() const;
  std::string positional(size_t i, const std::string& what);
  std::optional<std::string> optional_positional(size_t i);
  const std::vector<std::string>& rest() const { return rest_; }
  // Tokens no flag or positional has claimed, in order (for commands that pass a
  // command line through, like `launch` and `bench`).
  std::vector<std::string> unused() const;
  void finish();
  const std::string& command() const { return command_; }

 private:
  std::optional<std::string> take(const std::string& name);
  std::string command_;
  std::vector<std::string> tokens_;
  std::vector<bool> used_;
  std::vector<std::string> rest_;
  size_t positionals_used_ = 0;
};

}  // namespace moerl::cli
