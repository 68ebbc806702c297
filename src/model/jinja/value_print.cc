// Value::str, repr and to_json: Python's str()/repr() and json.dumps(ensure_ascii=False).
#include <cstdio>

#include "model/jinja/error.h"
#include "model/jinja/value.h"

namespace moerl::jinja {

namespace {

// Python's str.__repr__: single quotes unless the text has ' and no ".
std::string repr_string(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + q;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

void dump_json(const Value& v, int indent, int depth, std::string& out) {
  const auto newline = [&](int d) {
    if (indent >= 0) out += "\n" + std::string(static_cast<size_t>(indent * d), ' ');
  };
  const char* item_sep = indent >= 0 ? "," : ", ";
  if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    const std::string f = format_float(v.as_double());
    out += f == "nan" ? "NaN" : f == "inf" ? "Infinity" : f == "-inf" ? "-Infinity" : f;
  } else if (v.is_string()) {
    out += json_string(v.as_string());
  } else if (v.is_list()) {
    const auto& items = v.as_list().items;
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += "[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep;
      newline(depth + 1);
      dump_json(items[i], indent, depth + 1, out);
    }
    newline(depth);
    out += "]";
  } else if (v.is_dict()) {
    const auto& items = v.as_dict().items;
    if (items.empty()) {
      out += "{}";
      return;
    }
    out += "{";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep;
      newline(depth + 1);
      const Value& k = items[i].first;
      if (k.is_string()) {
        out += json_string(k.as_string());
      } else if (k.is_number() || k.is_none()) {
        std::string ks;
        dump_json(k, -1, 0, ks);
        out += json_string(ks);
      } else {
        throw TypeError("tojson: keys must be str, int, float, bool or None, not " + k.type_name());
      }
      out += ": ";
      dump_json(items[i].second, indent, depth + 1, out);
    }
    newline(depth);
    out += "}";
  } else {
    throw TypeError("tojson: Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

std::string Value::str() const {
  if (is_undefined()) return "";
  if (is_string()) return as_string();
  return repr();
}

std::string Value::repr() const {
  if (is_undefined()) return "";
  if (is_none()) return "None";
  if (is_bool()) return as_bool() ? "True" : "False";
  if (is_int()) return std::to_string(as_int());
  if (is_float()) return format_float(as_double());
  if (is_string()) return repr_string(as_string());
  if (is_list()) {
    const List& l = as_list();
    std::string out = l.is_tuple ? "(" : "[";
    for (size_t i = 0; i < l.items.size(); ++i) {
      if (i > 0) out += ", ";
      out += l.items[i].repr();
    }
    if (l.is_tuple && l.items.size() == 1) out += ",";
    out += l.is_tuple ? ")" : "]";
    return l.view ? std::string(l.view) + "(" + out + ")" : out;
  }
  if (is_dict() || is_namespace()) {
    const Dict& d = is_dict() ? as_dict() : as_namespace().attrs;
    std::string out = is_dict() ? "{" : "<Namespace {";
    for (size_t i = 0; i < d.items.size(); ++i) {
      if (i > 0) out += ", ";
      out += d.items[i].first.repr() + ": " + d.items[i].second.repr();
    }
    return out + (is_dict() ? "}" : "}>");
  }
  return "<function " + as_callable().name + ">";
}

std::string Value::to_json(int indent) const {
  std::string out;
  dump_json(*this, indent, 0, out);
  return out;
}

}  // namespace moerl::jinja
