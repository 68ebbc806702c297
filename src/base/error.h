// Errors: the one typed exception that edges throw (bad input, network, disk) and the
// CLI catches, plus Status/Result<T> for calls whose failure is an ordinary outcome.
// Messages name the input, the expected form, and end with a "HINT:" line.
//
//   throw moerl::Error("config: ep_size=3 must divide num_experts=8", "set ep_size to 1, 2, 4 or 8");
//   Result<int> r = parse(...); if (!r.ok()) return r.status();
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace moerl {

enum class ErrorCode {
  kInvalidInput,  // the user's file, flag or config is wrong
  kNotFound,      // a named object/file/key does not exist
  kIo,            // disk or network failed
  kTimeout,       // a deadline passed
  kUnavailable,   // a peer/service is down; retrying may help
  kInternal,      // an invariant broke: a bug in moerl
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(std::string message, std::string hint = "", ErrorCode code = ErrorCode::kInvalidInput);
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }

 private:
  ErrorCode code_;
  std::string message_;
  std::string hint_;
};

class Status {
 public:
  Status() = default;  // ok
  static Status ok_status() { return Status(); }
  static Status error(ErrorCode code, std::string message, std::string hint = "") {
    Status s;
    s.err_.emplace(std::move(message), std::move(hint), code);
    return s;
  }
  static Status from(const Error& e) {
    Status s;
    s.err_.emplace(e);
    return s;
  }
  bool ok() const { return !err_.has_value(); }
  ErrorCode code() const { return err_ ? err_->code() : ErrorCode::kInternal; }
  std::string to_string() const { return err_ ? std::string(err_->what()) : "OK"; }
  // Throws the carried error; no-op when ok.
  void throw_if_error() const {
    if (err_) throw *err_;
  }

 private:
  std::optional<Error> err_;
};

template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    status_.throw_if_error();
    return *value_;
  }
  T&& value() && {
    status_.throw_if_error();
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace moerl
