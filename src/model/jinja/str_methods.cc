// The str methods templates call (split, strip, startswith, replace, find, ...) with
// Python's semantics on code points, and the case helpers the filters share.
#include <algorithm>

#include "model/jinja/builtins.h"
#include "model/jinja/error.h"

namespace moerl::jinja {

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

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

}  // namespace

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

static const std::vector<std::string> kStrMethods = {"startswith", "endswith", "split", "rsplit", "strip", "lstrip",
                                              "rstrip", "replace", "upper", "lower", "capitalize", "title",
                                              "find", "rfind", "count", "index", "splitlines", "join",
                                              "removeprefix", "removesuffix", "isspace", "isdigit", "isalpha",
                                              "isalnum", "islower", "isupper"};

bool is_str_method(const std::string& name) { return contains(kStrMethods, name); }

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

}  // namespace moerl::jinja
