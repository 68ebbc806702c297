// Checks shared by INFRA.toml parsing (infra.cc) and its validation against the job
// (infra_validate.cc): the error naming the INFRA file and field, and DNS-1123 labels.
#pragma once

#include <regex>
#include <string>

#include "base/error.h"
#include "deploy/infra.h"

namespace moerl::deploy::detail {

[[noreturn]] inline void fail(const InfraConfig& c, const std::string& field, const std::string& what,
                       const std::string& hint) {
  throw Error("INFRA " + c.source + ": " + field + " " + what, hint);
}

inline bool dns1123_label(const std::string& s) {
  static const std::regex re("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
  return s.size() <= 63 && std::regex_match(s, re);
}

}  // namespace moerl::deploy::detail
