// Jinja's filters (`x | name(...)`) that chat templates use, with jinja2's behaviour and
// transformers' tojson (json.dumps, ensure_ascii=False, optional indent).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "model/jinja/builtins.h"
#include "model/jinja/error.h"

namespace moerl::jinja {

namespace {

using FilterFn = Value (*)(const Value&, CallArgs&);

std::vector<Value> seq(const Value& v) { return iterate(v); }

// The attribute path "a.b" or integer index of map/selectattr/sort/join attribute=.
Value attribute(const Value& v, const Value& attr) {
  if (attr.is_int()) return get_item(v, attr);
  Value cur = v;
  const std::string path = attr.str();
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    cur = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit) ? get_item(cur, Value(static_cast<int64_t>(std::stoll(part))))
                                                                          : get_item(cur, Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value f_length(const Value& v, CallArgs& a) {
  Params p("length", a, {});
  if (v.is_string()) return Value(static_cast<int64_t>(utf8_length(v.as_string())));
  if (v.is_undefined()) return Value(int64_t{0});
  if (v.is_namespace()) throw TypeError("object of type 'Namespace' has no len()");
  return Value(static_cast<int64_t>(seq(v).size()));
}

Value f_tojson(const Value& v, CallArgs& a) {
  Params p("tojson", a, {"indent"});
  if (p.has(0) && !p.get(0).is_none() && !p.get(0).is_int()) throw TypeError("tojson(): indent must be an int");
  return Value(v.to_json(p.has(0) && !p.get(0).is_none() ? static_cast<int>(p.get(0).as_int()) : -1));
}

Value f_default(const Value& v, CallArgs& a) {
  Params p("default", a, {"default_value", "boolean"});
  const bool use_default = v.is_undefined() || (p.get_bool(1, false) && !v.truthy());
  return use_default ? p.get_or(0, Value("")) : v;
}

Value f_join(const Value& v, CallArgs& a) {
  Params p("join", a, {"d", "attribute"});
  const std::string sep = p.get_str(0, "");
  std::string out;
  size_t i = 0;
  for (const Value& x : seq(v)) {
    if (i++ > 0) out += sep;
    out += (p.has(1) ? attribute(x, p.get(1)) : x).str();
  }
  return Value(out);
}

Value f_map(const Value& v, CallArgs& a) {
  std::vector<Value> out;
  if (!a.pos.empty()) {  // map('filter', args...)
    if (!a.pos[0].is_string()) throw TypeError("map(): the filter name must be a string");
    const std::string name = a.pos[0].as_string();
    if (!has_filter(name)) throw TypeError("map(): unknown filter '" + name + "'");
    CallArgs rest{std::vector<Value>(a.pos.begin() + 1, a.pos.end()), a.kw};
    for (const Value& x : seq(v)) {
      CallArgs copy = rest;
      out.push_back(call_filter(name, x, copy));
    }
    return Value::list(std::move(out));
  }
  Params p("map", a, {"attribute", "default"});
  if (!p.has(0)) throw TypeError("map() needs a filter name or attribute=");
  for (const Value& x : seq(v)) {
    Value got = attribute(x, p.get(0));
    out.push_back(got.is_undefined() && p.has(1) ? p.get(1) : got);
  }
  return Value::list(std::move(out));
}

// select/reject/selectattr/rejectattr: keep items whose test (or truthiness) is `keep`.
Value select(const Value& v, CallArgs& a, bool by_attr, bool keep, const char* fn) {
  std::vector<Value> args = a.pos;
  if (!a.kw.empty()) throw TypeError(std::string(fn) + "() takes no keyword arguments");
  Value attr;
  if (by_attr) {
    if (args.empty()) throw TypeError(std::string(fn) + "() needs an attribute name");
    attr = args[0];
    args.erase(args.begin());
  }
  std::string test;
  if (!args.empty()) {
    if (!args[0].is_string()) throw TypeError(std::string(fn) + "(): the test name must be a string");
    test = args[0].as_string();
    args.erase(args.begin());
    if (!has_test(test)) throw TypeError(std::string(fn) + "(): unknown test '" + test + "'");
  }
  std::vector<Value> out;
  for (const Value& x : seq(v)) {
    const Value item = by_attr ? attribute(x, attr) : x;
    CallArgs ta{args, {}};
    const bool ok = test.empty() ? item.truthy() : call_test(test, item, ta);
    if (ok == keep) out.push_back(x);
  }
  return Value::list(std::move(out));
}

Value f_select(const Value& v, CallArgs& a) { return select(v, a, false, true, "select"); }
Value f_reject(const Value& v, CallArgs& a) { return select(v, a, false, false, "reject"); }
Value f_selectattr(const Value& v, CallArgs& a) { return select(v, a, true, true, "selectattr"); }
Value f_rejectattr(const Value& v, CallArgs& a) { return select(v, a, true, false, "rejectattr"); }

Value str_call(const Value& v, const char* method, CallArgs& a) {
  Value m = get_attr(Value(v.str()), method);
  return m.as_callable().fn(a);
}

Value f_trim(const Value& v, CallArgs& a) {
  Params p("trim", a, {"chars"});
  return Value(py_strip(v.str(), p.get(0), true, true));
}
Value f_upper(const Value& v, CallArgs& a) { return str_call(v, "upper", a); }
Value f_lower(const Value& v, CallArgs& a) { return str_call(v, "lower", a); }
Value f_capitalize(const Value& v, CallArgs& a) { return str_call(v, "capitalize", a); }
Value f_replace(const Value& v, CallArgs& a) { return str_call(v, "replace", a); }

Value f_title(const Value& v, CallArgs& a) {  // jinja2: capitalise after runs of space - ( { [ <
  Params p("title", a, {});
  const std::string s = py_lower(v.str());
  std::string out;
  bool start = true;
  for (char c : s) {
    const bool sep = std::isspace(static_cast<unsigned char>(c)) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    out += start && !sep ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    start = sep;
  }
  return Value(out);
}

Value f_items(const Value& v, CallArgs& a) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) throw TypeError("items(): can only get item pairs from a mapping, not " + v.type_name());
  Value items = get_attr(v, "items").as_callable().fn(a);
  items.as_list().view = nullptr;  // jinja2's items filter yields pairs, not a dict view
  return items;
}

Value f_list(const Value& v, CallArgs& a) {
  Params p("list", a, {});
  return Value::list(seq(v));
}

Value f_first(const Value& v, CallArgs& a) {
  Params p("first", a, {});
  auto s = seq(v);
  return s.empty() ? Value::undefined("first of an empty sequence") : s.front();
}

Value f_last(const Value& v, CallArgs& a) {
  Params p("last", a, {});
  auto s = seq(v);
  return s.empty() ? Value::undefined("last of an empty sequence") : s.back();
}

Value f_string(const Value& v, CallArgs& a) {
  Params p("string", a, {});
  return Value(v.str());
}

Value f_safe(const Value& v, CallArgs& a) {
  Params p("safe", a, {});
  return v;
}

Value f_int(const Value& v, CallArgs& a) {
  Params p("int", a, {"default", "base"});
  const Value dflt = p.get_or(0, Value(int64_t{0}));
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) return std::isfinite(v.as_double()) ? Value(static_cast<int64_t>(v.as_double())) : dflt;
  if (v.is_string()) {
    try {
      size_t used = 0;
      const std::string s = py_strip(v.as_string(), Value(), true, true);
      const int64_t i = std::stoll(s, &used, static_cast<int>(p.get_int(1, 10)));
      if (used == s.size()) return Value(i);
      const double d = std::stod(s, &used);
      if (used == s.size()) return Value(static_cast<int64_t>(d));
    } catch (const std::exception&) {
    }
  }
  return dflt;
}

Value f_float(const Value& v, CallArgs& a) {
  Params p("float", a, {"default"});
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    try {
      size_t used = 0;
      const std::string s = py_strip(v.as_string(), Value(), true, true);
      const double d = std::stod(s, &used);
      if (used == s.size()) return Value(d);
    } catch (const std::exception&) {
    }
  }
  return p.get_or(0, Value(0.0));
}

Value f_abs(const Value& v, CallArgs& a) {
  Params p("abs", a, {});
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_number()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  throw TypeError("bad operand type for abs(): '" + v.type_name() + "'");
}

Value f_round(const Value& v, CallArgs& a) {
  Params p("round", a, {"precision", "method"});
  if (!v.is_number()) throw TypeError("round(): needs a number, not " + v.type_name());
  const std::string method = p.get_str(1, "common");
  const int64_t precision = p.get_int(0, 0);
  if (precision < 0 || precision > 15) throw TypeError("round(): precision must be 0..15");
  if (method == "common") {  // Python's round(): the correctly rounded decimal, ties to even
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), v.as_double());
    return Value(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "floor") return Value(std::floor(v.as_double() * scale) / scale);
  if (method == "ceil") return Value(std::ceil(v.as_double() * scale) / scale);
  throw TypeError("round(): method must be 'common', 'ceil' or 'floor'");
}

Value f_escape(const Value& v, CallArgs& a) {
  Params p("escape", a, {});
  std::string out;
  for (char c : v.str()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(out);
}

Value f_indent(const Value& v, CallArgs& a) {
  Params p("indent", a, {"width", "first", "blank"});
  const std::string ind = p.has(0) && p.get(0).is_string() ? p.get(0).as_string()
                                                           : std::string(static_cast<size_t>(p.get_int(0, 4)), ' ');
  const std::vector<std::string> lines = py_splitlines(v.str() + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i > 0 && (p.get_bool(2, false) || !lines[i].empty())) out += ind;
    out += lines[i];
  }
  return Value(p.get_bool(1, false) ? ind + out : out);
}

Value f_reverse(const Value& v, CallArgs& a) {
  Params p("reverse", a, {});
  if (v.is_string()) return get_slice(v, Value(), Value(), Value(int64_t{-1}));
  auto s = seq(v);
  std::reverse(s.begin(), s.end());
  return Value::list(std::move(s));
}

Value sort_key(const Value& x, const Params& p, size_t attr_idx, bool case_sensitive) {
  Value k = p.has(attr_idx) ? attribute(x, p.get(attr_idx)) : x;
  if (!case_sensitive && k.is_string()) return Value(py_lower(k.as_string()));
  return k;
}

Value f_unique(const Value& v, CallArgs& a) {
  Params p("unique", a, {"case_sensitive", "attribute"});
  std::vector<Value> out, keys;
  for (const Value& x : seq(v)) {
    Value k = sort_key(x, p, 1, p.get_bool(0, false));
    if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
    keys.push_back(k);
    out.push_back(x);
  }
  return Value::list(std::move(out));
}

Value f_sort(const Value& v, CallArgs& a) {
  Params p("sort", a, {"reverse", "case_sensitive", "attribute"});
  auto s = seq(v);
  const bool cs = p.get_bool(1, false), rev = p.get_bool(0, false);
  std::stable_sort(s.begin(), s.end(), [&](const Value& x, const Value& y) {
    const int c = compare_values(sort_key(x, p, 2, cs), sort_key(y, p, 2, cs));
    return rev ? c > 0 : c < 0;
  });
  return Value::list(std::move(s));
}

Value f_batch(const Value& v, CallArgs& a) {
  Params p("batch", a, {"linecount", "fill_with"});
  const int64_t n = p.get_int(0, 1);
  if (n <= 0) throw TypeError("batch(): linecount must be positive");
  std::vector<Value> out, cur;
  for (const Value& x : seq(v)) {
    cur.push_back(x);
    if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::list(std::exchange(cur, {})));
  }
  if (!cur.empty()) {
    while (p.has(1) && static_cast<int64_t>(cur.size()) < n) cur.push_back(p.get(1));
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> kFilters = {
      {"length", f_length},   {"count", f_length},        {"tojson", f_tojson},   {"default", f_default},
      {"d", f_default},       {"join", f_join},           {"map", f_map},         {"select", f_select},
      {"reject", f_reject},   {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"trim", f_trim},
      {"upper", f_upper},     {"lower", f_lower},         {"capitalize", f_capitalize}, {"title", f_title},
      {"replace", f_replace}, {"items", f_items},         {"list", f_list},       {"first", f_first},
      {"last", f_last},       {"string", f_string},       {"safe", f_safe},       {"int", f_int},
      {"float", f_float},     {"abs", f_abs},             {"round", f_round},     {"e", f_escape},
      {"escape", f_escape},   {"indent", f_indent},       {"reverse", f_reverse}, {"unique", f_unique},
      {"sort", f_sort},       {"batch", f_batch},
  };
  return kFilters;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) > 0; }

Value call_filter(const std::string& name, const Value& v, CallArgs& args) {
  const auto it = filters().find(name);
  if (it == filters().end()) throw TypeError("unknown filter '" + name + "'");
  return it->second(v, args);
}

}  // namespace moerl::jinja
