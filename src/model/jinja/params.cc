// Params (Python-style argument binding for builtins) and the UTF-8 helpers.
#include "model/jinja/builtins.h"
#include "model/jinja/error.h"

namespace moerl::jinja {

Params::Params(std::string fn, CallArgs& args, std::initializer_list<const char*> names)
    : fn_(std::move(fn)), names_(names), values_(names.size()) {
  if (args.pos.size() > names_.size()) {
    throw TypeError(fn_ + "() takes at most " + std::to_string(names_.size()) + " argument(s) (" +
                    std::to_string(args.pos.size()) + " given)");
  }
  for (size_t i = 0; i < args.pos.size(); ++i) values_[i] = args.pos[i];
  for (auto& [k, v] : args.kw) {
    size_t i = 0;
    while (i < names_.size() && k != names_[i]) ++i;
    if (i == names_.size()) throw TypeError(fn_ + "() got an unexpected keyword argument '" + k + "'");
    values_[i] = v;
  }
}

int64_t Params::get_int(size_t i, int64_t dflt) const {
  if (!has(i)) return dflt;
  if (!values_[i].is_int() && !values_[i].is_bool()) {
    throw TypeError(fn_ + "(): argument '" + names_[i] + "' must be an int, not " + values_[i].type_name());
  }
  return values_[i].as_int();
}

std::string Params::get_str(size_t i, const std::string& dflt) const {
  if (!has(i) || values_[i].is_none()) return dflt;
  if (!values_[i].is_string()) {
    throw TypeError(fn_ + "(): argument '" + names_[i] + "' must be a str, not " + values_[i].type_name());
  }
  return values_[i].as_string();
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool is_py_space(const std::string& ch) {
  if (ch.size() == 1) {
    const char c = ch[0];
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
  }
  static const char* kSpaces[] = {"\u0085", "\u00a0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003",
                                  "\u2004", "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a",
                                  "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"};
  for (const char* s : kSpaces) {
    if (ch == s) return true;
  }
  return false;
}

}  // namespace moerl::jinja
