// Typed, error-reporting reads of one JSON object of a config.json (internal to io/:
// hf_config.cc and hf_config_families.cc). Every error names the file and the field and
// carries a HINT.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/hf_config.h"

namespace moerl::io::detail {

using nlohmann::json;

// Reads typed fields from one config object; every error names the file and field.
class FieldReader {
 public:
  FieldReader(const json& j, std::string source) : j_(j), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what,
                         const std::string& hint) const {
    throw Error(source_ + ": field '" + field + "' " + what, hint);
  }

  // nullptr when absent or JSON null (transformers treats null as "use the default").
  const json* find(const std::string& field) const {
    auto it = j_.find(field);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  int64_t integer_value(const std::string& field, const json& v) const {
    if (v.is_number_integer() || v.is_number_unsigned()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) {
        fail(field, "is " + v.dump() + ", too large", "use a value below 2^63");
      }
      return v.get<int64_t>();
    }
    // Some exporters write 4096.0; accept floats that are whole numbers.
    if (v.is_number_float()) {
      double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return int64_t(d);
    }
    fail(field, "must be an integer, got " + v.dump(), "write it as a whole number, e.g. 8");
  }

  int64_t integer(const std::string& field, int64_t fallback) const {
    const json* v = find(field);
    return v ? integer_value(field, *v) : fallback;
  }

  int64_t required_integer(const std::string& field, const std::string& hint) const {
    const json* v = find(field);
    if (v == nullptr) fail(field, "is missing (required)", hint);
    return integer_value(field, *v);
  }

  double number(const std::string& field, double fallback) const {
    const json* v = find(field);
    if (v == nullptr) return fallback;
    if (!v->is_number()) fail(field, "must be a number, got " + v->dump(), "e.g. 1e-6");
    return v->get<double>();
  }

  bool boolean(const std::string& field, bool fallback) const {
    const json* v = find(field);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(field, "must be true or false, got " + v->dump(), "use true or false");
    return v->get<bool>();
  }

  std::string string(const std::string& field, const std::string& fallback) const {
    const json* v = find(field);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail(field, "must be a string, got " + v->dump(), "quote it");
    return v->get<std::string>();
  }

  // An int, or a list of ints (eos_token_id); a list yields its first element.
  // Absent: the class default; explicit null: no such token (-1), as in transformers.
  int64_t token_id(const std::string& field, int64_t fallback) const {
    if (j_.find(field) == j_.end()) return fallback;
    const json* v = find(field);
    if (v == nullptr) return -1;
    if (v->is_array()) {
      if (v->empty()) return -1;
      return integer_value(field, (*v)[0]);
    }
    return integer_value(field, *v);
  }

  std::vector<int64_t> integer_list(const std::string& field) const {
    const json* v = find(field);
    std::vector<int64_t> out;
    if (v == nullptr) return out;
    if (!v->is_array()) fail(field, "must be a list of integers, got " + v->dump(), "e.g. [0, 3]");
    for (const json& e : *v) out.push_back(integer_value(field, e));
    return out;
  }

  // True when the field is present, even as an explicit null.
  bool has(const std::string& field) const { return j_.find(field) != j_.end(); }

  std::optional<double> optional_number(const std::string& field) const {
    const json* v = find(field);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) fail(field, "must be a number or null, got " + v->dump(), "e.g. 1.0");
    return v->get<double>();
  }

  const std::string& source() const { return source_; }

 private:
  const json& j_;
  std::string source_;
};

// Expert count under one of two names (transformers generations differ); Error when both
// are absent or they disagree.
int64_t read_num_experts(const FieldReader& r, const std::string& preferred, const std::string& other);

// The per-architecture parts of config.json (hf_config_families.cc).
bool is_known_model_type(const std::string& model_type);
// Reads the fields whose names or defaults depend on c.model_type (the common sizes are read).
void parse_family(const FieldReader& r, HfConfig& c);
void validate_family(const HfConfig& c, const std::string& source_name);
// Adds the architecture's fields (names transformers reads back) to `j`.
void family_json(const HfConfig& c, json& j);

}  // namespace moerl::io::detail
