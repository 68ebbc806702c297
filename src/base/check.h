// Invariant checks. A failed CHECK is a bug in moerl, not bad input: it throws
// moerl::Error(kInternal) naming file:line, the condition and the values involved.
// For user input, throw moerl::Error with a HINT instead.
//
//   MOERL_CHECK(n > 0) << "while splitting " << name;
//   MOERL_CHECK_EQ(a.size(0), b.size(0));
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "base/error.h"

namespace moerl::detail {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const std::string& what) {
    os_ << file << ":" << line << ": check failed: " << what;
  }
  [[noreturn]] ~CheckFailure() noexcept(false) {
    throw Error(os_.str(), "this is a bug in moerl; please report it with the command that ran",
                ErrorCode::kInternal);
  }
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    if (!has_context_) {
      os_ << " (";
      has_context_ = true;
    }
    os_ << v;
    return *this;
  }

 private:
  std::ostringstream os_;
  bool has_context_ = false;
};

template <typename A, typename B>
std::string format_pair(const char* op, const char* as, const char* bs, const A& a, const B& b) {
  std::ostringstream os;
  os << as << " " << op << " " << bs << " [" << a << " vs " << b << "]";
  return os.str();
}

}  // namespace moerl::detail

#define MOERL_CHECK(cond) \
  if (cond) {             \
  } else                  \
    ::moerl::detail::CheckFailure(__FILE__, __LINE__, #cond)

#define MOERL_CHECK_OP_(op, a, b)                                                  \
  if (auto moerl_v_ = std::make_pair((a), (b)); moerl_v_.first op moerl_v_.second) {   \
  } else                                                                              \
    ::moerl::detail::CheckFailure(__FILE__, __LINE__,                                 \
                                  ::moerl::detail::format_pair(#op, #a, #b, moerl_v_.first, moerl_v_.second))

#define MOERL_CHECK_EQ(a, b) MOERL_CHECK_OP_(==, a, b)
#define MOERL_CHECK_NE(a, b) MOERL_CHECK_OP_(!=, a, b)
#define MOERL_CHECK_LT(a, b) MOERL_CHECK_OP_(<, a, b)
#define MOERL_CHECK_LE(a, b) MOERL_CHECK_OP_(<=, a, b)
#define MOERL_CHECK_GT(a, b) MOERL_CHECK_OP_(>, a, b)
#define MOERL_CHECK_GE(a, b) MOERL_CHECK_OP_(>=, a, b)
