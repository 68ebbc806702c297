// Values of the Jinja interpreter, with Python semantics: undefined, None, bool, int,
// float, str, list/tuple, dict (insertion-ordered), namespace() and callables.
// Lists, dicts and namespaces are shared references (as in Python); strings are UTF-8.
//
//   Value v = Value::from_json(nlohmann::ordered_json::parse(R"({"a": [1, 2.5, null]})"));
//   v.str();           // "{'a': [1, 2.5, None]}"   (what {{ v }} prints)
//   v.truthy();        // true
//
// Immutable except through the reference types; not thread-safe to share while mutating.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace moerl::jinja {

class Value;

struct Undefined {
  std::string name;  // what was looked up, for error messages
};
struct None {};
struct List {
  std::vector<Value> items;
  bool is_tuple = false;
  const char* view = nullptr;  // "dict_items", "dict_keys", "dict_values": how Python prints it
};
struct Dict {
  std::vector<std::pair<Value, Value>> items;  // insertion order, unique keys
  const Value* find(const Value& key) const;
  void set(Value key, Value value);
};
struct Namespace {
  Dict attrs;
};
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};
struct Callable {
  std::string name;
  std::function<Value(CallArgs&)> fn;
};

class Value {
 public:
  using Data = std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<List>,
                            std::shared_ptr<Dict>, std::shared_ptr<Namespace>, std::shared_ptr<Callable>>;
  Value() : data_(Undefined{}) {}
  Value(Data d) : data_(std::move(d)) {}
  Value(None) : data_(None{}) {}
  Value(bool b) : data_(b) {}
  Value(int v) : data_(int64_t{v}) {}
  Value(int64_t v) : data_(v) {}
  Value(double v) : data_(v) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(const char* s) : data_(std::string(s)) {}
  static Value undefined(std::string name) { return Value(Data(Undefined{std::move(name)})); }
  static Value list(std::vector<Value> items, bool is_tuple = false);
  static Value dict(Dict d = {});
  static Value callable(std::string name, std::function<Value(CallArgs&)> fn);
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return std::holds_alternative<Undefined>(data_); }
  bool is_none() const { return std::holds_alternative<None>(data_); }
  bool is_bool() const { return std::holds_alternative<bool>(data_); }
  bool is_int() const { return std::holds_alternative<int64_t>(data_); }  // not bool
  bool is_float() const { return std::holds_alternative<double>(data_); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return std::holds_alternative<std::string>(data_); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<List>>(data_); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(data_); }
  bool is_namespace() const { return std::holds_alternative<std::shared_ptr<Namespace>>(data_); }
  bool is_callable() const { return std::holds_alternative<std::shared_ptr<Callable>>(data_); }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;  // int or bool
  double as_double() const;  // int, bool or float
  const std::string& as_string() const { return std::get<std::string>(data_); }
  List& as_list() const { return *std::get<std::shared_ptr<List>>(data_); }
  Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(data_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(data_); }
  Callable& as_callable() const { return *std::get<std::shared_ptr<Callable>>(data_); }
  const std::string& undefined_name() const { return std::get<Undefined>(data_).name; }
  const Data& data() const { return data_; }

  bool truthy() const;
  std::string type_name() const;  // Python's: "str", "int", "list", "dict", "NoneType", ...
  std::string str() const;        // Python str(): what {{ }} prints ("" for undefined)
  std::string repr() const;       // Python repr(): 'a', [1, 'b'], {'k': None}
  // json.dumps(..., ensure_ascii=False); indent < 0: one line with ", " and ": ".
  std::string to_json(int indent = -1) const;
  bool operator==(const Value& other) const;  // Python ==: 1 == 1.0 == True

 private:
  Data data_;
};

// Python's float repr: shortest round-trip digits, "2.0", "1e+16", "inf", "nan".
std::string format_float(double v);

}  // namespace moerl::jinja
