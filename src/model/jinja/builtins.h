// The interpreter's builtins, behind one header: operators (operators.cc), attribute and
// item access with the str/dict/list methods (methods.cc), filters (filters.cc), tests
// (tests.cc) and globals (globals.cc). Each throws TypeError (no position) on a bad type or
// argument; the evaluator adds the template position.
//
//   CallArgs a;  a.pos = {Value(", ")};
//   call_filter("join", Value::list({Value("a"), Value("b")}), a);   // "a, b"
#pragma once

#include <initializer_list>
#include <string>

#include "model/jinja/value.h"

namespace moerl::jinja {

// operators.cc
Value binary_op(const std::string& op, const Value& a, const Value& b);  // + - * / // % ** ~
bool compare_op(const std::string& op, const Value& a, const Value& b);  // == != < <= > >= in, not in
int compare_values(const Value& a, const Value& b);                      // <0, 0, >0; TypeError if unorderable
[[noreturn]] void fail_undefined(const Value& u, const std::string& doing);

// methods.cc
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
std::vector<Value> iterate(const Value& v);  // list items, dict keys, str characters; undefined: none

// filters.cc / tests.cc
bool has_filter(const std::string& name);
Value call_filter(const std::string& name, const Value& v, CallArgs& args);
bool has_test(const std::string& name);
bool call_test(const std::string& name, const Value& v, CallArgs& args);

// globals.cc: namespace, raise_exception, strftime_now, range, dict
Dict make_globals();

// Binds call arguments to parameter names, Python style.
class Params {
 public:
  Params(std::string fn, CallArgs& args, std::initializer_list<const char*> names);
  bool has(size_t i) const { return !values_[i].is_undefined(); }
  const Value& get(size_t i) const { return values_[i]; }
  Value get_or(size_t i, Value dflt) const { return has(i) ? values_[i] : std::move(dflt); }
  int64_t get_int(size_t i, int64_t dflt) const;
  std::string get_str(size_t i, const std::string& dflt) const;
  bool get_bool(size_t i, bool dflt) const { return has(i) ? values_[i].truthy() : dflt; }
  const std::string& fn() const { return fn_; }

 private:
  std::string fn_;
  std::vector<const char*> names_;
  std::vector<Value> values_;
};

// str methods (str_methods.cc); the case helpers are shared with the filters.
Value str_method(const std::string& s, const std::string& name, CallArgs& args);
bool is_str_method(const std::string& name);
// Case changes are ASCII only and throw
// TypeError on other letters rather than render them unchanged.
std::string py_upper(const std::string& s);
std::string py_lower(const std::string& s);
std::string py_capitalize(const std::string& s);
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right);
std::vector<std::string> py_splitlines(const std::string& s);

// UTF-8 helpers: characters are code points, as Python's str.
std::vector<std::string> utf8_chars(const std::string& s);
size_t utf8_length(const std::string& s);
bool is_py_space(const std::string& ch);  // str.isspace() of one character

}  // namespace moerl::jinja
