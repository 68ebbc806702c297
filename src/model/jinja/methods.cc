// Attribute and item access as Jinja's sandbox does it (a dict's methods shadow its keys
// for `.name`, a missing key or index is undefined, any access on an undefined throws),
// slicing, iteration, and the str/dict/list methods templates call.
#include <algorithm>

#include "model/jinja/builtins.h"
#include "model/jinja/error.h"

namespace moerl::jinja {

namespace {

bool non_ascii(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
}

void require_ascii(const std::string& s, const char* what) {
  if (non_ascii(s)) throw TypeError(std::string(what) + " of non-ASCII text is not supported by moerl's interpreter");
}

std::vector<std::string> split_ws(const std::string& s, int64_t maxsplit, bool from_right) {
  std::vector<std::string> chars = utf8_chars(s);
  if (from_right) std::reverse(chars.begin(), chars.end());
  std::vector<std::string> parts;
  size_t i = 0;
  while (true) {
    while (i < chars.size() && is_py_space(chars[i])) ++i;
    if (i == chars.size()) break;
    std::string part;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      size_t end = chars.size();
      while (end > i && is_py_space(chars[end - 1])) --end;
      for (size_t j = i; j < end; ++j) part += chars[j];
      parts.push_back(part);
      break;
    }
    while (i < chars.size() && !is_py_space(chars[i])) part += chars[i++];
    parts.push_back(part);
  }
  if (from_right) {
    std::reverse(parts.begin(), parts.end());
    for (auto& p : parts) {
      auto cs = utf8_chars(p);
      std::reverse(cs.begin(), cs.end());
      p.clear();
      for (auto& c : cs) p += c;
    }
  }
  return parts;
}

std::vector<std::string> split_sep(const std::string& s, const std::string& sep, int64_t maxsplit, bool from_right) {
  if (sep.empty()) throw TypeError("split(): empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t f = s.find(sep, start);
      if (f == std::string::npos) break;
      parts.push_back(s.substr(start, f - start));
      start = f + sep.size();
    }
    parts.push_back(s.substr(start));
    return parts;
  }
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < sep.size()) break;
    const size_t f = s.rfind(sep, end - sep.size());
    if (f == std::string::npos) break;
    parts.push_back(s.substr(f + sep.size(), end - f - sep.size()));
    end = f;
  }
  parts.push_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

Value str_list(const std::vector<std::string>& parts) {
  std::vector<Value> out;
  for (const auto& p : parts) out.emplace_back(p);
  return Value::list(std::move(out));
}

int64_t char_index(const std::string& s, size_t byte_pos) {
  return byte_pos == std::string::npos ? -1 : static_cast<int64_t>(utf8_length(s.substr(0, byte_pos)));
}

bool has_prefix(const std::string& s, const Value& p, bool suffix, const std::string& fn) {
  const auto one = [&](const Value& x) {
    if (!x.is_string()) throw TypeError(fn + "() argument must be str or a tuple of str, not " + x.type_name());
    const std::string& t = x.as_string();
    if (t.size() > s.size()) return false;
    return suffix ? s.compare(s.size() - t.size(), t.size(), t) == 0 : s.compare(0, t.size(), t) == 0;
  };
  if (p.is_list()) {
    return std::any_of(p.as_list().items.begin(), p.as_list().items.end(), one);
  }
  return one(p);
}

Value str_method(const std::string& s, const std::string& name, CallArgs& a) {
  if (name == "startswith" || name == "endswith") {
    Params p(name, a, {"prefix"});
    return Value(has_prefix(s, p.get(0), name == "endswith", name));
  }
  if (name == "split" || name == "rsplit") {
    Params p(name, a, {"sep", "maxsplit"});
    const int64_t maxsplit = p.get_int(1, -1);
    const bool right = name == "rsplit";
    if (!p.has(0) || p.get(0).is_none()) return str_list(split_ws(s, maxsplit, right));
    return str_list(split_sep(s, p.get_str(0, ""), maxsplit, right));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Params p(name, a, {"chars"});
    return Value(py_strip(s, p.get(0), name != "rstrip", name != "lstrip"));
  }
  if (name == "replace") {
    Params p(name, a, {"old", "new", "count"});
    const std::string from = p.get_str(0, ""), to = p.get_str(1, "");
    int64_t count = p.get_int(2, -1);
    std::string out;
    if (from.empty()) throw TypeError("replace() with an empty old string is not supported");
    size_t start = 0;
    while (count != 0) {
      const size_t f = s.find(from, start);
      if (f == std::string::npos) break;
      out += s.substr(start, f - start) + to;
      start = f + from.size();
      --count;
    }
    return Value(out + s.substr(start));
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    Params p(name, a, {});
    if (name == "upper") return Value(py_upper(s));
    if (name == "lower") return Value(py_lower(s));
    if (name == "capitalize") return Value(py_capitalize(s));
    require_ascii(s, "title()");
    std::string out = s;
    bool prev_cased = false;
    for (char& c : out) {
      const bool cased = std::isalpha(static_cast<unsigned char>(c));
      if (cased) c = prev_cased ? static_cast<char>(std::tolower(c)) : static_cast<char>(std::toupper(c));
      prev_cased = cased;
    }
    return Value(out);
  }
  if (name == "find" || name == "rfind" || name == "count" || name == "index") {
    Params p(name, a, {"sub"});
    const std::string sub = p.get_str(0, "");
    if (name == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
      int64_t n = 0;
      for (size_t f = s.find(sub); f != std::string::npos; f = s.find(sub, f + sub.size())) ++n;
      return Value(n);
    }
    const int64_t i = char_index(s, name == "rfind" ? s.rfind(sub) : s.find(sub));
    if (name == "index" && i < 0) throw TypeError("substring not found");
    return Value(i);
  }
  if (name == "splitlines") {
    Params p(name, a, {});
    return str_list(py_splitlines(s));
  }
  if (name == "join") {
    Params p(name, a, {"iterable"});
    std::string out;
    size_t i = 0;
    for (const Value& v : iterate(p.get(0))) {
      if (!v.is_string()) {
        throw TypeError("sequence item " + std::to_string(i) + ": expected str instance, " + v.type_name() + " found");
      }
      if (i++ > 0) out += s;
      out += v.as_string();
    }
    return Value(out);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    Params p(name, a, {"affix"});
    const std::string x = p.get_str(0, "");
    if (!has_prefix(s, Value(x), name == "removesuffix", name)) return Value(s);
    return Value(name == "removeprefix" ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
  }
  // isspace, isdigit, isalpha, isalnum, islower, isupper
  Params p(name, a, {});
  if (s.empty()) return Value(false);
  if (name == "isspace") {
    auto cs = utf8_chars(s);
    return Value(std::all_of(cs.begin(), cs.end(), is_py_space));
  }
  require_ascii(s, (name + "()").c_str());
  const auto all = [&](int (*f)(int)) { return std::all_of(s.begin(), s.end(), [&](char c) { return f(static_cast<unsigned char>(c)) != 0; }); };
  if (name == "isdigit") return Value(all(::isdigit));
  if (name == "isalpha") return Value(all(::isalpha));
  if (name == "isalnum") return Value(all(::isalnum));
  const bool any_alpha = std::any_of(s.begin(), s.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
  if (name == "islower") return Value(any_alpha && py_lower(s) == s);
  return Value(any_alpha && py_upper(s) == s);
}

const std::vector<std::string> kStrMethods = {"startswith", "endswith", "split", "rsplit", "strip", "lstrip",
                                              "rstrip", "replace", "upper", "lower", "capitalize", "title",
                                              "find", "rfind", "count", "index", "splitlines", "join",
                                              "removeprefix", "removesuffix", "isspace", "isdigit", "isalpha",
                                              "isalnum", "islower", "isupper"};
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
  return Value::list(std::move(out));
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

std::string py_upper(const std::string& s) {
  require_ascii(s, "upper()");
  std::string o = s;
  for (char& c : o) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return o;
}

std::string py_lower(const std::string& s) {
  require_ascii(s, "lower()");
  std::string o = s;
  for (char& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

std::string py_capitalize(const std::string& s) {
  std::string o = py_lower(s);
  if (!o.empty()) o[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(o[0])));
  return o;
}

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::vector<std::string> cs = utf8_chars(s);
  std::vector<std::string> set;
  const bool ws = chars.is_undefined() || chars.is_none();
  if (!ws) {
    if (!chars.is_string()) throw TypeError("strip arg must be None or str, not " + chars.type_name());
    set = utf8_chars(chars.as_string());
  }
  const auto strip_it = [&](const std::string& c) { return ws ? is_py_space(c) : contains(set, c); };
  size_t b = 0, e = cs.size();
  if (left) {
    while (b < e && strip_it(cs[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(cs[e - 1])) --e;
  }
  std::string out;
  for (size_t i = b; i < e; ++i) out += cs[i];
  return out;
}

std::vector<std::string> py_splitlines(const std::string& s) {
  static const std::vector<std::string> kBreaks = {"\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\u0085", "\u2028", "\u2029"};
  std::vector<std::string> lines;
  std::string cur;
  const auto cs = utf8_chars(s);
  for (size_t i = 0; i < cs.size(); ++i) {
    if (!contains(kBreaks, cs[i])) {
      cur += cs[i];
      continue;
    }
    if (cs[i] == "\r" && i + 1 < cs.size() && cs[i + 1] == "\n") ++i;
    lines.push_back(cur);
    cur.clear();
  }
  if (!cur.empty()) lines.push_back(cur);
  return lines;
}

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
    if (contains(kStrMethods, name)) return bind(obj, name, str_method_value);
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
