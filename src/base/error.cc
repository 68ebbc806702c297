#include "base/error.h"

namespace moerl {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidInput: return "invalid input";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kIo: return "I/O error";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kInternal: return "internal error";
  }
  return "error";
}

static std::string compose(const std::string& message, const std::string& hint) {
  return hint.empty() ? message : message + "\nHINT: " + hint;
}

Error::Error(std::string message, std::string hint, ErrorCode code)
    : std::runtime_error(compose(message, hint)),
      code_(code),
      message_(std::move(message)),
      hint_(std::move(hint)) {}

}  // namespace moerl
