// Python semantics of Jinja's operators: int/float arithmetic (floor division and modulo
// round toward -inf), str and list concatenation and repetition, ~, comparisons, `in`.
#include <cmath>

#include "model/jinja/builtins.h"
#include "model/jinja/error.h"

namespace moerl::jinja {

void fail_undefined(const Value& u, const std::string& doing) {
  const std::string& n = u.undefined_name();
  throw TypeError((n.empty() ? std::string("a value") : "'" + n + "'") + " is undefined (" + doing + ")",
                  "the template reads a variable or key the input does not have; add it to the messages or "
                  "the template variables");
}

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw TypeError("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

[[noreturn]] void overflow(const std::string& op) {
  throw TypeError("integer overflow in " + op + " (moerl's ints are 64-bit)");
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value(out);
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) {
    for (const auto& v : seq.as_list().items) out.push_back(v);
  }
  return Value::list(std::move(out), seq.as_list().is_tuple);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_float() || b.is_float() || op == "/") {
    const double x = a.as_double(), y = b.as_double();
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (op == "**") return Value(std::pow(x, y));
    if (y == 0.0) throw TypeError(op == "/" ? "division by zero" : "float modulo or floor division by zero");
    if (op == "/") return Value(x / y);
    if (op == "//") return Value(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
    return Value(m);
  }
  const int64_t x = a.as_int(), y = b.as_int();
  int64_t r = 0;
  if (op == "+" || op == "-" || op == "*") {
    const bool bad = op == "+" ? __builtin_add_overflow(x, y, &r)
                     : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                 : __builtin_mul_overflow(x, y, &r);
    if (bad) overflow(op);
    return Value(r);
  }
  if (op == "**") {
    if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
    int64_t p = 1;
    for (int64_t i = 0; i < y; ++i) {
      if (__builtin_mul_overflow(p, x, &p)) overflow(op);
    }
    return Value(p);
  }
  if (y == 0) throw TypeError("integer division or modulo by zero");
  int64_t q = x / y, m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) {
    q -= 1;
    m += y;
  }
  return Value(op == "//" ? q : m);
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.str() + b.str());
  if (a.is_undefined()) fail_undefined(a, "operand of " + op);
  if (b.is_undefined()) fail_undefined(b, "operand of " + op);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+" && a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
  if (op == "+" && a.is_list() && b.is_list()) {
    std::vector<Value> items = a.as_list().items;
    for (const auto& v : b.as_list().items) items.push_back(v);
    return Value::list(std::move(items), a.as_list().is_tuple);
  }
  if (op == "*" && (a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
  if (op == "*" && (b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
  if (op == "%" && a.is_string()) throw TypeError("printf-style string formatting ('...' % x) is not supported");
  unsupported(op, a, b);
}

int compare_values(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {  // UTF-8 byte order is code point order
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    const auto &x = a.as_list().items, &y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!(x[i] == y[i])) return compare_values(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_undefined()) fail_undefined(a, "compared");
  if (b.is_undefined()) fail_undefined(b, "compared");
  throw TypeError("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool compare_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return a == b;
  if (op == "!=") return !(a == b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) throw TypeError("'in <string>' requires string as left operand, not " + a.type_name());
      found = b.as_string().find(a.as_string()) != std::string::npos;
    } else if (b.is_list()) {
      for (const auto& v : b.as_list().items) found = found || v == a;
    } else if (b.is_dict()) {
      found = b.as_dict().find(a) != nullptr;
    } else if (b.is_namespace()) {
      found = b.as_namespace().attrs.find(a) != nullptr;
    } else if (!b.is_undefined()) {  // an undefined iterates as empty
      throw TypeError("argument of type '" + b.type_name() + "' is not iterable");
    }
    return op == "in" ? found : !found;
  }
  const int c = compare_values(a, b);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

}  // namespace moerl::jinja
