#include "base/config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "base/error.h"

namespace moerl {

namespace {

std::string join(const std::vector<std::string>& xs) {
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + xs[i];
  return s;
}

std::string describe(const toml::node& n) {
  std::ostringstream os;
  if (n.is_string()) {
    os << '"' << *n.value<std::string>() << '"';
  } else if (n.is_table()) {
    os << "a table";
  } else if (n.is_array()) {
    os << "an array";
  } else {
    n.visit([&](auto&& v) {
      if constexpr (toml::is_value<decltype(v)>) os << v;
    });
  }
  return os.str();
}

// Applies "a.b.c=value"; value parsed as a TOML value, else taken as a string.
void apply_override(toml::table& root, const std::string& kv) {
  auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw Error("--set '" + kv + "' is not of the form key=value", "example: --set train.lr=1e-4");
  }
  std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  toml::table* t = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    toml::node* n = t->get(parts[i]);
    if (n == nullptr) {
      t->insert(parts[i], toml::table{});
      n = t->get(parts[i]);
    }
    if (!n->is_table()) {
      throw Error("--set " + key + ": '" + parts[i] + "' is a value, not a table", "check the key path");
    }
    t = n->as_table();
  }
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    parsed = toml::table{};
    parsed.insert("v", value);
  }
  t->insert_or_assign(parts.back(), std::move(*parsed.get("v")));
}

}  // namespace

ConfigTable::ConfigTable(std::shared_ptr<toml::table> root, toml::table* table, std::string path)
    : root_(std::move(root)), table_(table), path_(std::move(path)) {}

std::string ConfigTable::full(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void ConfigTable::fail(const std::string& key, const std::string& what, const std::string& hint) const {
  throw Error("config: " + full(key) + " " + what, hint);
}

bool ConfigTable::has(const std::string& key) const {
  return table_ != nullptr && table_->get(key) != nullptr;
}

const toml::node* ConfigTable::lookup(const std::string& key) {
  read_.insert(key);
  return table_ ? table_->get(key) : nullptr;
}

double ConfigTable::number(const std::string& key, double fallback, Range range) {
  const toml::node* n = lookup(key);
  double v = fallback;
  if (n) {
    if (auto d = n->value<double>()) {
      v = *d;
    } else {
      fail(key, "= " + describe(*n) + " is not a number", "write a number, e.g. " + full(key) + " = 0.5");
    }
  }
  if (!(v >= range.min && v <= range.max)) {
    std::ostringstream os;
    os << "= " << v << " is outside [" << range.min << ", " << range.max << "]";
    fail(key, os.str(), range.hint ? range.hint : "choose a value in range");
  }
  return v;
}

int64_t ConfigTable::integer(const std::string& key, int64_t fallback, Range range) {
  const toml::node* n = lookup(key);
  int64_t v = fallback;
  if (n) {
    if (auto i = n->value_exact<int64_t>()) {
      v = *i;
    } else {
      fail(key, "= " + describe(*n) + " is not an integer", "write a whole number without quotes");
    }
  }
  if (!(static_cast<double>(v) >= range.min && static_cast<double>(v) <= range.max)) {
    // Whole bounds print as integers (1048576, not 1.04858e+06).
    auto bound = [](double b) {
      return std::abs(b) < 1e15 && b == std::floor(b) ? std::to_string(static_cast<int64_t>(b)) : std::to_string(b);
    };
    fail(key, "= " + std::to_string(v) + " is outside [" + bound(range.min) + ", " + bound(range.max) + "]",
         range.hint ? range.hint : "choose a value in range");
  }
  return v;
}

bool ConfigTable::boolean(const std::string& key, bool fallback) {
  const toml::node* n = lookup(key);
  if (!n) return fallback;
  if (auto b = n->value_exact<bool>()) return *b;
  fail(key, "= " + describe(*n) + " is not a boolean", "write true or false (no quotes)");
}

std::string ConfigTable::string(const std::string& key, const std::string& fallback) {
  const toml::node* n = lookup(key);
  if (!n) return fallback;
  if (auto s = n->value_exact<std::string>()) return *s;
  fail(key, "= " + describe(*n) + " is not a string", "quote the value: " + full(key) + " = \"...\"");
}

std::string ConfigTable::required_string(const std::string& key) {
  if (!has(key)) fail(key, "is missing", "add " + full(key) + " = \"...\" to the config");
  return string(key, "");
}

std::string ConfigTable::choice(const std::string& key, const std::string& fallback,
                                const std::vector<std::string>& accepted) {
  std::string v = string(key, fallback);
  for (const auto& a : accepted) {
    if (a == v) return v;
  }
  fail(key, "= \"" + v + "\" is not accepted", "accepted values: " + join(accepted));
}

std::vector<int64_t> ConfigTable::integers(const std::string& key, const std::vector<int64_t>& fallback) {
  const toml::node* n = lookup(key);
  if (!n) return fallback;
  if (!n->is_array()) fail(key, "= " + describe(*n) + " is not an array", "write e.g. [0, 2]");
  std::vector<int64_t> out;
  for (const auto& e : *n->as_array()) {
    auto i = e.value_exact<int64_t>();
    if (!i) fail(key, "has a non-integer element " + describe(e), "write whole numbers only");
    out.push_back(*i);
  }
  return out;
}

std::vector<std::string> ConfigTable::strings(const std::string& key,
                                              const std::vector<std::string>& fallback) {
  const toml::node* n = lookup(key);
  if (!n) return fallback;
  if (!n->is_array()) fail(key, "= " + describe(*n) + " is not an array", "write e.g. [\"a\", \"b\"]");
  std::vector<std::string> out;
  for (const auto& e : *n->as_array()) {
    auto s = e.value_exact<std::string>();
    if (!s) fail(key, "has a non-string element " + describe(e), "quote every element");
    out.push_back(*s);
  }
  return out;
}

ConfigTable ConfigTable::table(const std::string& key) {
  const toml::node* n = lookup(key);
  if (n && !n->is_table()) fail(key, "= " + describe(*n) + " is not a table", "write [" + full(key) + "]");
  return ConfigTable(root_, n ? const_cast<toml::node*>(n)->as_table() : nullptr, full(key));
}

std::vector<std::string> ConfigTable::keys() const {
  std::vector<std::string> out;
  if (table_) {
    for (const auto& [k, v] : *table_) out.emplace_back(k.str());
  }
  return out;
}

void ConfigTable::done() {
  if (!table_) return;
  std::vector<std::string> unknown, accepted(read_.begin(), read_.end());
  for (const auto& [k, v] : *table_) {
    if (!read_.count(std::string(k.str()))) unknown.emplace_back(k.str());
  }
  if (!unknown.empty()) {
    throw Error("config: unknown key(s) in [" + (path_.empty() ? std::string("top level") : path_) +
                    "]: " + join(unknown),
                "accepted keys here: " + join(accepted));
  }
}

ConfigDoc ConfigDoc::load(const std::string& file, const std::vector<std::string>& overrides) {
  std::ifstream in(file);
  if (!in) throw Error("config: cannot read '" + file + "'", "check the path", ErrorCode::kNotFound);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), file, overrides);
}

ConfigDoc ConfigDoc::parse(const std::string& text, const std::string& source_name,
                           const std::vector<std::string>& overrides) {
  ConfigDoc doc;
  doc.source_ = source_name;
  try {
    doc.table_ = std::make_shared<toml::table>(toml::parse(text, source_name));
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << "config: " << source_name << ":" << e.source().begin.line << ":" << e.source().begin.column
       << ": " << e.description();
    throw Error(os.str(), "the file must be valid TOML (https://toml.io)");
  }
  for (const auto& kv : overrides) apply_override(*doc.table_, kv);
  return doc;
}

ConfigTable ConfigDoc::root() { return ConfigTable(table_, table_.get(), ""); }

std::string ConfigDoc::to_toml() const {
  // Basic strings only: toml++ writes a string holding a newline as a multi-line literal,
  // and reading '''<newline>... back trims that first newline (a stop string "\n\n" came
  // back as "\n"). Escaped basic strings read back byte for byte.
  constexpr auto kFlags = toml::toml_formatter::default_flags & ~(toml::format_flags::allow_literal_strings |
                                                                  toml::format_flags::allow_multi_line_strings |
                                                                  toml::format_flags::allow_real_tabs_in_strings);
  std::ostringstream os;
  os << toml::toml_formatter(*table_, kFlags);
  return os.str();
}

}  // namespace moerl
