// Attribute and item access as Jinja's sandbox does it (a dict's methods shadow its keys
// for `.name`, a missing key or index is undefined, any access on an undefined throws),
// slicing, iteration, and the str/dict/list methods templates call.
#include <algorithm>

#include "model/jinja/builtins.h"
#include "model/jinja/error.h"

namespace moerl::jinja {

namespace {

const std::vector<std::string> kStrUnsupported = {"casefold", "center", "encode", "expandtabs", "format",
                                                  "format_map", "isascii", "isdecimal", "isidentifier",
                                                  "isnumeric", "isprintable", "istitle", "ljust", "maketrans",
                                                  "partition", "rindex", "rjust", "rpartition", "swapcase",
                                                  "translate", "zfill"};
const std::vector<std::string> kDictMethods = {"items", "keys", "values", "get"};
const std::vector<std::string> kDictUnsupported = {"clear", "copy", "fromkeys", "pop", "popitem", "setdefault", "update"};
const std::vector<std::string> kListMethods = {"index", "count"};
const std::vector<std::string> kListUnsupported = {"append", "clear", "copy", "extend", "insert", "pop",
                                                   "remove", "reverse", "sort"};

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

Value dict_method(const Value& obj, const std::string& name, CallArgs& a) {
  const Dict& d = obj.as_dict();
  if (name == "get") {
    Params p(name, a, {"key", "default"});
    const Value* v = d.find(p.get(0));
    return v ? *v : p.get_or(1, Value(None{}));
  }
  Params p(name, a, {});
  std::vector<Value> out;
  for (const auto& [k, v] : d.items) {
    out.push_back(name == "keys" ? k : name == "values" ? v : Value::list({k, v}, true));
  }
  Value view = Value::list(std::move(out));
  view.as_list().view = name == "keys" ? "dict_keys" : name == "values" ? "dict_values" : "dict_items";
  return view;
}

Value list_method(const Value& obj, const std::string& name, CallArgs& a) {
  Params p(name, a, {"value"});
  const auto& items = obj.as_list().items;
  if (name == "count") return Value(static_cast<int64_t>(std::count(items.begin(), items.end(), p.get(0))));
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i] == p.get(0)) return Value(static_cast<int64_t>(i));
  }
  throw TypeError(p.get(0).repr() + " is not in list");
}

Value bind(const Value& obj, const std::string& name, Value (*fn)(const Value&, const std::string&, CallArgs&)) {
  return Value::callable(obj.type_name() + "." + name, [obj, name, fn](CallArgs& a) { return fn(obj, name, a); });
}

Value str_method_value(const Value& obj, const std::string& name, CallArgs& a) { return str_method(obj.as_string(), name, a); }

[[noreturn]] void unsupported_method(const Value& obj, const std::string& name) {
  throw TypeError("method " + obj.type_name() + "." + name + "() is not supported by moerl's interpreter");
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj, "reading its attribute '" + name + "'");
  if (obj.is_dict()) {
    if (contains(kDictMethods, name)) return bind(obj, name, dict_method);
    if (contains(kDictUnsupported, name)) unsupported_method(obj, name);
    const Value* v = obj.as_dict().find(Value(name));
    return v ? *v : Value::undefined(name);
  }
  if (obj.is_namespace()) {
    const Value* v = obj.as_namespace().attrs.find(Value(name));
    return v ? *v : Value::undefined(name);
  }
  if (obj.is_string()) {
    if (is_str_method(name)) return bind(obj, name, str_method_value);
    if (contains(kStrUnsupported, name)) unsupported_method(obj, name);
  }
  if (obj.is_list()) {
    if (contains(kListMethods, name)) return bind(obj, name, list_method);
    if (contains(kListUnsupported, name)) unsupported_method(obj, name);
  }
  return Value::undefined(name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj, "reading its item " + key.repr());
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().find(key);
    if (v) return *v;
    return key.is_string() ? get_attr(obj, key.as_string()) : Value::undefined(key.repr());
  }
  if (obj.is_namespace() && key.is_string()) return get_attr(obj, key.as_string());
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      const auto& items = obj.as_list().items;
      if (i < 0) i += static_cast<int64_t>(items.size());
      return i >= 0 && i < static_cast<int64_t>(items.size()) ? items[i] : Value::undefined("[" + key.repr() + "]");
    }
    const auto cs = utf8_chars(obj.as_string());
    if (i < 0) i += static_cast<int64_t>(cs.size());
    return i >= 0 && i < static_cast<int64_t>(cs.size()) ? Value(cs[i]) : Value::undefined("[" + key.repr() + "]");
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value::undefined("[" + key.repr() + "]");
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) fail_undefined(obj, "sliced");
  if (!obj.is_list() && !obj.is_string()) throw TypeError("'" + obj.type_name() + "' object is not subscriptable");
  const auto index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) throw TypeError(std::string("slice ") + what + " must be an integer or None");
    return v.as_int();
  };
  const int64_t step = index(step_v, "step").value_or(1);
  if (step == 0) throw TypeError("slice step cannot be zero");
  const std::vector<std::string> cs = obj.is_string() ? utf8_chars(obj.as_string()) : std::vector<std::string>{};
  const int64_t n = obj.is_string() ? static_cast<int64_t>(cs.size()) : static_cast<int64_t>(obj.as_list().items.size());
  const auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  const int64_t start = adjust(index(start_v, "start"), step < 0 ? n - 1 : 0);
  const int64_t stop = adjust(index(stop_v, "stop"), step < 0 ? -1 : n);
  std::vector<Value> items;
  std::string text;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (obj.is_string()) {
      text += cs[i];
    } else {
      items.push_back(obj.as_list().items[i]);
    }
  }
  return obj.is_string() ? Value(text) : Value::list(std::move(items), obj.as_list().is_tuple);
}

std::vector<Value> iterate(const Value& v) {
  if (v.is_undefined()) return {};
  if (v.is_list()) return v.as_list().items;
  if (v.is_dict()) {
    std::vector<Value> keys;
    for (const auto& kv : v.as_dict().items) keys.push_back(kv.first);
    return keys;
  }
  if (v.is_string()) {
    std::vector<Value> out;
    for (auto& c : utf8_chars(v.as_string())) out.emplace_back(c);
    return out;
  }
  throw TypeError("'" + v.type_name() + "' object is not iterable");
}

}  // namespace moerl::jinja
