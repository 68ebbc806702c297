// JSON -> YAML emitter (block style). Output is checked by the node validator, which parses
// it back with a YAML 1.2 parser and compares nothing but what the schemas see.
#include "deploy/yaml.h"

#include <regex>
#include <sstream>

namespace moerl::deploy {

namespace {

bool needs_quotes(const std::string& s) {
  if (s.empty()) return true;
  static const std::regex plain("^[A-Za-z_/$][A-Za-z0-9_./$()@+-]*$");
  if (!std::regex_match(s, plain)) return true;
  // Words YAML 1.1 readers (and some 1.2 ones) turn into booleans or null.
  static const char* kWords[] = {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"};
  std::string lower;
  for (char ch : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* w : kWords) {
    if (lower == w) return true;
  }
  return false;
}

std::string scalar(const Json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    return needs_quotes(s) ? Json(s).dump() : s;
  }
  return v.dump();  // numbers, booleans, null: JSON spelling is YAML spelling
}

std::string key_text(const std::string& k) { return needs_quotes(k) ? Json(k).dump() : k; }

bool is_block_string(const Json& v) {
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.find('\n') == std::string::npos) return false;
  for (char ch : s) {
    if (ch == '\r' || (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t')) return false;
  }
  return true;
}

void block_string(std::ostringstream& os, const std::string& s, int indent) {
  // Chomping: '|' keeps one final newline, '|-' none, '|+' all.
  size_t trailing = 0;
  while (trailing < s.size() && s[s.size() - 1 - trailing] == '\n') ++trailing;
  os << '|';
  if (!s.empty() && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n')) os << "2";
  os << (trailing == 0 ? "-" : trailing == 1 ? "" : "+") << '\n';
  std::string pad(indent, ' ');
  std::string body = trailing ? s.substr(0, s.size() - 1) : s;  // the final newline ends the last line
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    os << (line.empty() ? "" : pad) << line << '\n';
  }
  for (size_t i = 1; i < trailing; ++i) os << '\n';
}

void emit(std::ostringstream& os, const Json& v, int indent);

bool is_empty_container(const Json& v) { return (v.is_object() || v.is_array()) && v.empty(); }

void emit_value_after_key(std::ostringstream& os, const Json& v, int indent) {
  if (is_empty_container(v)) {
    os << ' ' << (v.is_object() ? "{}" : "[]") << '\n';
  } else if (v.is_object()) {
    os << '\n';
    emit(os, v, indent + 2);
  } else if (v.is_array()) {
    os << '\n';
    emit(os, v, indent);  // sequences under a key sit at the key's indentation
  } else if (is_block_string(v)) {
    os << ' ';
    block_string(os, v.get_ref<const std::string&>(), indent + 2);
  } else {
    os << ' ' << scalar(v) << '\n';
  }
}

void emit(std::ostringstream& os, const Json& v, int indent) {
  std::string pad(indent, ' ');
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      os << pad << key_text(it.key()) << ':';
      emit_value_after_key(os, it.value(), indent);
    }
  } else if (v.is_array()) {
    for (const auto& e : v) {
      os << pad << "- ";
      if (e.is_object() && !e.empty()) {
        // First key on the dash line, the rest aligned under it.
        bool first = true;
        for (auto it = e.begin(); it != e.end(); ++it) {
          if (!first) os << pad << "  ";
          first = false;
          os << key_text(it.key()) << ':';
          emit_value_after_key(os, it.value(), indent + 2);
        }
      } else if (e.is_array() && !e.empty()) {
        os << '\n';
        emit(os, e, indent + 2);
      } else if (is_empty_container(e)) {
        os << (e.is_object() ? "{}" : "[]") << '\n';
      } else if (is_block_string(e)) {
        block_string(os, e.get_ref<const std::string&>(), indent + 2);
      } else {
        os << scalar(e) << '\n';
      }
    }
  } else {
    os << pad << scalar(v) << '\n';
  }
}

}  // namespace

std::string to_yaml(const Json& doc) {
  std::ostringstream os;
  emit(os, doc, 0);
  return os.str();
}

std::string to_yaml_stream(const std::vector<Json>& docs) {
  std::string out;
  for (const auto& d : docs) out += "---\n" + to_yaml(d);
  return out;
}

}  // namespace moerl::deploy
