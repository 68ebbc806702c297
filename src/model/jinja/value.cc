#include "model/jinja/value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "model/jinja/error.h"

namespace moerl::jinja {

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::list(std::vector<Value> items, bool is_tuple) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  l->is_tuple = is_tuple;
  return Value(Data(std::move(l)));
}

Value Value::dict(Dict d) { return Value(Data(std::make_shared<Dict>(std::move(d)))); }

Value Value::callable(std::string name, std::function<Value(CallArgs&)> fn) {
  return Value(Data(std::make_shared<Callable>(Callable{std::move(name), std::move(fn)})));
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value(None{});
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Value(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      d.items.reserve(j.size());
      for (const auto& [k, v] : j.items()) d.items.emplace_back(Value(k), from_json(v));
      return dict(std::move(d));
    }
    default: throw TypeError("cannot use JSON value " + j.dump() + " in a template");
  }
}

int64_t Value::as_int() const { return is_bool() ? (as_bool() ? 1 : 0) : std::get<int64_t>(data_); }

double Value::as_double() const { return is_float() ? std::get<double>(data_) : static_cast<double>(as_int()); }

bool Value::truthy() const {
  return std::visit(
      [](const auto& d) -> bool {
        using T = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<T, Undefined> || std::is_same_v<T, None>) return false;
        else if constexpr (std::is_same_v<T, bool>) return d;
        else if constexpr (std::is_same_v<T, int64_t>) return d != 0;
        else if constexpr (std::is_same_v<T, double>) return d != 0.0;
        else if constexpr (std::is_same_v<T, std::string>) return !d.empty();
        else if constexpr (std::is_same_v<T, std::shared_ptr<List>>) return !d->items.empty();
        else if constexpr (std::is_same_v<T, std::shared_ptr<Dict>>) return !d->items.empty();
        else return true;
      },
      data_);
}

std::string Value::type_name() const {
  static const char* kNames[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list", "dict",
                                 "Namespace", "function"};
  if (is_list() && as_list().is_tuple) return "tuple";
  return kNames[data_.index()];
}

bool Value::operator==(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (is_float() || o.is_float()) return as_double() == o.as_double();
    return as_int() == o.as_int();
  }
  if (data_.index() != o.data_.index()) return false;
  if (is_undefined() || is_none()) return true;
  if (is_string()) return as_string() == o.as_string();
  if (is_list()) {
    const auto &a = as_list().items, &b = o.as_list().items;
    if (a.size() != b.size() || as_list().is_tuple != o.as_list().is_tuple) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!(a[i] == b[i])) return false;
    }
    return true;
  }
  if (is_dict()) {
    const auto &a = as_dict(), &b = o.as_dict();
    if (a.items.size() != b.items.size()) return false;
    for (const auto& [k, v] : a.items) {
      const Value* w = b.find(k);
      if (w == nullptr || !(*w == v)) return false;
    }
    return true;
  }
  if (is_namespace()) return &as_namespace() == &o.as_namespace();
  return &as_callable() == &o.as_callable();
}

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest digits that round-trip, then Python's layout: fixed for 1e-4 <= |v| < 1e16.
  char buf[40];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s(buf);
  const size_t e = s.find('e');
  const int exp = std::atoi(s.c_str() + e + 1);
  std::string digits;
  const bool neg = s[0] == '-';
  for (size_t i = neg ? 1 : 0; i < e; ++i) {
    if (s[i] != '.') digits += s[i];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(-exp - 1, '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + ebuf;
}

}  // namespace moerl::jinja
