#include "cli/args.h"

#include <cstdlib>

#include "base/error.h"

namespace moerl::cli {

Args::Args(std::string command, std::vector<std::string> argv) : command_(std::move(command)) {
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--") {
      rest_.assign(argv.begin() + static_cast<long>(i) + 1, argv.end());
      break;
    }
    tokens_.push_back(argv[i]);
  }
  used_.assign(tokens_.size(), false);
}

std::optional<std::string> Args::take(const std::string& name) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (used_[i]) continue;
    const std::string& t = tokens_[i];
    if (t == name) {
      if (i + 1 >= tokens_.size() || used_[i + 1]) {
        throw Error("moerl " + command_ + ": " + name + " needs a value", "write " + name + " VALUE");
      }
      used_[i] = used_[i + 1] = true;
      return tokens_[i + 1];
    }
    if (t.rfind(name + "=", 0) == 0) {
      used_[i] = true;
      return t.substr(name.size() + 1);
    }
  }
  return std::nullopt;
}

bool Args::flag(const std::string& name) {
  bool found = false;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (!used_[i] && tokens_[i] == name) used_[i] = found = true;
  }
  return found;
}

std::optional<std::string> Args::value(const std::string& name) { return take(name); }

std::string Args::value_or(const std::string& name, const std::string& fallback) {
  return take(name).value_or(fallback);
}

std::string Args::required(const std::string& name) {
  auto v = take(name);
  if (!v) throw Error("moerl " + command_ + ": missing " + name, "see `moerl " + command_ + " --help`");
  return *v;
}

std::vector<std::string> Args::values(const std::string& name) {
  std::vector<std::string> out;
  while (auto v = take(name)) out.push_back(*v);
  return out;
}

int64_t Args::integer(const std::string& name, int64_t fallback) {
  auto v = take(name);
  if (!v) return fallback;
  char* end = nullptr;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0') {
    throw Error("moerl " + command_ + ": " + name + " " + *v + " is not an integer", "give a whole number");
  }
  return x;
}

double Args::number(const std::string& name, double fallback) {
  auto v = take(name);
  if (!v) return fallback;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end != '\0') {
    throw Error("moerl " + command_ + ": " + name + " " + *v + " is not a number", "give a number like 0.7");
  }
  return x;
}

std::vector<std::string> Args::positionals() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (!used_[i] && (tokens_[i].empty() || tokens_[i][0] != '-' || tokens_[i] == "-")) out.push_back(tokens_[i]);
  }
  return out;
}

std::optional<std::string> Args::optional_positional(size_t i) {
  auto p = positionals();
  if (i >= p.size()) return std::nullopt;
  positionals_used_ = std::max(positionals_used_, i + 1);
  return p[i];
}

std::string Args::positional(size_t i, const std::string& what) {
  auto v = optional_positional(i);
  if (!v) throw Error("moerl " + command_ + ": missing " + what, "see `moerl " + command_ + " --help`");
  return *v;
}

std::vector<std::string> Args::unused() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < tokens_.size(); ++i)
    if (!used_[i]) out.push_back(tokens_[i]);
  return out;
}

void Args::finish() {
  auto p = positionals();
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (!used_[i] && !tokens_[i].empty() && tokens_[i][0] == '-' && tokens_[i] != "-") {
      throw Error("moerl " + command_ + ": unknown option " + tokens_[i],
                  "see `moerl " + command_ + " --help` for the accepted options");
    }
  }
  if (p.size() > positionals_used_) {
    throw Error("moerl " + command_ + ": unexpected argument '" + p[positionals_used_] + "'",
                "see `moerl " + command_ + " --help`");
  }
}

}  // namespace moerl::cli
