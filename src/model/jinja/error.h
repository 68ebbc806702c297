// Errors of the Jinja interpreter: every one is a moerl::Error whose message starts with
// "chat template line L col C:" and names the construct; builtins (filters, tests,
// methods, operators) throw TypeError without a position and the evaluator adds it.
//
//   throw_at({3, 7}, "unknown filter 'wordwrap'", "supported filters: ...");
#pragma once

#include <stdexcept>
#include <string>

namespace moerl::jinja {

struct Pos {
  int line = 1, col = 1;
};

// A runtime failure inside a builtin; the evaluator rethrows it as a located moerl::Error.
class TypeError : public std::runtime_error {
 public:
  explicit TypeError(const std::string& what, std::string hint = "")
      : std::runtime_error(what), hint_(std::move(hint)) {}
  const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

[[noreturn]] void throw_at(Pos pos, const std::string& what, const std::string& hint = "");

}  // namespace moerl::jinja
