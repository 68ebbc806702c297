// Jinja's tests (`x is name`), with jinja2's definitions (`number` includes bool, `integer`
// does not; a str, list or dict is a `sequence`).
#include <map>

#include "model/jinja/builtins.h"
#include "model/jinja/error.h"

namespace moerl::jinja {

namespace {

using TestFn = bool (*)(const Value&, Params&);

int64_t int_arg(const Value& v, const char* test) {
  if (!v.is_int() && !v.is_bool()) throw TypeError(std::string("test '") + test + "' needs an integer, not " + v.type_name());
  return v.as_int();
}

const std::map<std::string, std::pair<std::vector<const char*>, TestFn>>& tests() {
  static const std::map<std::string, std::pair<std::vector<const char*>, TestFn>> kTests = {
      {"defined", {{}, [](const Value& v, Params&) { return !v.is_undefined(); }}},
      {"undefined", {{}, [](const Value& v, Params&) { return v.is_undefined(); }}},
      {"none", {{}, [](const Value& v, Params&) { return v.is_none(); }}},
      {"string", {{}, [](const Value& v, Params&) { return v.is_string(); }}},
      {"number", {{}, [](const Value& v, Params&) { return v.is_number(); }}},
      {"integer", {{}, [](const Value& v, Params&) { return v.is_int(); }}},
      {"float", {{}, [](const Value& v, Params&) { return v.is_float(); }}},
      {"boolean", {{}, [](const Value& v, Params&) { return v.is_bool(); }}},
      {"true", {{}, [](const Value& v, Params&) { return v.is_bool() && v.as_bool(); }}},
      {"false", {{}, [](const Value& v, Params&) { return v.is_bool() && !v.as_bool(); }}},
      {"mapping", {{}, [](const Value& v, Params&) { return v.is_dict(); }}},
      {"iterable",
       {{}, [](const Value& v, Params&) { return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined(); }}},
      {"sequence",
       {{}, [](const Value& v, Params&) { return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined(); }}},
      {"callable", {{}, [](const Value& v, Params&) { return v.is_callable(); }}},
      {"even", {{}, [](const Value& v, Params&) { return int_arg(v, "even") % 2 == 0; }}},
      {"odd", {{}, [](const Value& v, Params&) { return int_arg(v, "odd") % 2 != 0; }}},
      {"divisibleby",
       {{"num"},
        [](const Value& v, Params& p) {
          const int64_t d = int_arg(p.get(0), "divisibleby");
          if (d == 0) throw TypeError("divisibleby 0");
          return int_arg(v, "divisibleby") % d == 0;
        }}},
      {"lower", {{}, [](const Value& v, Params&) { return v.is_string() && py_lower(v.as_string()) == v.as_string(); }}},
      {"upper", {{}, [](const Value& v, Params&) { return v.is_string() && py_upper(v.as_string()) == v.as_string(); }}},
      {"eq", {{"other"}, [](const Value& v, Params& p) { return compare_op("==", v, p.get(0)); }}},
      {"ne", {{"other"}, [](const Value& v, Params& p) { return compare_op("!=", v, p.get(0)); }}},
      {"lt", {{"other"}, [](const Value& v, Params& p) { return compare_op("<", v, p.get(0)); }}},
      {"le", {{"other"}, [](const Value& v, Params& p) { return compare_op("<=", v, p.get(0)); }}},
      {"gt", {{"other"}, [](const Value& v, Params& p) { return compare_op(">", v, p.get(0)); }}},
      {"ge", {{"other"}, [](const Value& v, Params& p) { return compare_op(">=", v, p.get(0)); }}},
      {"in", {{"seq"}, [](const Value& v, Params& p) { return compare_op("in", v, p.get(0)); }}},
      {"sameas",
       {{"other"},
        [](const Value& v, Params& p) {
          const Value& o = p.get(0);
          if (v.is_list() && o.is_list()) return &v.as_list() == &o.as_list();
          if (v.is_dict() && o.is_dict()) return &v.as_dict() == &o.as_dict();
          return (v.is_none() || v.is_bool()) && v.data().index() == o.data().index() && v == o;
        }}},
  };
  return kTests;
}

const std::map<std::string, std::string>& aliases() {
  static const std::map<std::string, std::string> kAliases = {
      {"equalto", "eq"}, {"==", "eq"}, {"!=", "ne"}, {"lessthan", "lt"}, {"greaterthan", "gt"},
      {"<", "lt"},       {"<=", "le"}, {">", "gt"},  {">=", "ge"}};
  return kAliases;
}

std::string canonical(const std::string& name) {
  const auto it = aliases().find(name);
  return it == aliases().end() ? name : it->second;
}

}  // namespace

bool has_test(const std::string& name) { return tests().count(canonical(name)) > 0; }

bool call_test(const std::string& name, const Value& v, CallArgs& args) {
  const auto it = tests().find(canonical(name));
  if (it == tests().end()) throw TypeError("unknown test '" + name + "'");
  if (!it->second.first.empty()) {
    Params p("test " + name, args, {it->second.first[0]});
    return it->second.second(v, p);
  }
  Params p("test " + name, args, {});
  return it->second.second(v, p);
}

}  // namespace moerl::jinja
