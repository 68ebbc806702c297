// What the interpreter refuses, and how: unsupported syntax and unknown filters fail when
// the template is parsed (even in a branch not taken, as jinja2 does), runtime errors when
// it is rendered; every message names the template line and column and the construct.
#include <gtest/gtest.h>

#include "base/error.h"
#include "model/jinja/template.h"

namespace moerl::jinja {
namespace {

std::string error_of(const std::string& tmpl, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object()) {
  try {
    Template(tmpl).render(ctx);
  } catch (const Error& e) {
    EXPECT_FALSE(e.hint().empty()) << tmpl;
    return e.message();
  }
  ADD_FAILURE() << "no error for: " << tmpl;
  return "";
}

void expect_error(const std::string& tmpl, const std::string& needle,
                  const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object()) {
  const std::string msg = error_of(tmpl, ctx);
  EXPECT_NE(msg.find(needle), std::string::npos) << "\"" << needle << "\" not in: " << msg;
}

TEST(JinjaErrors, UnsupportedSyntaxNamesTheLine) {
  expect_error("ok\n{% include 'other.jinja' %}", "line 2 col 4: unsupported tag '{% include %}'");
  expect_error("{% call foo() %}x{% endcall %}", "line 1 col 4: unsupported tag '{% call %}'");
  expect_error("{% raw %}{{ x }}{% endraw %}", "unsupported tag '{% raw %}'");
  expect_error("{% filter upper %}x{% endfilter %}", "unsupported tag '{% filter %}'");
  expect_error("{% if false %}\n  {{ x | wordwrap }}\n{% endif %}", "line 2 col 8: unknown filter 'wordwrap'");
  expect_error("{{ x is prime }}", "line 1 col 6: unknown test 'prime'");
  expect_error("{% for x in xs recursive %}{% endfor %}", "recursive for loops are not supported");
  expect_error("{{ f(*args) }}", "*args and **kwargs");
  expect_error("{{ 'a'.format(1) }}", "method str.format() is not supported");
  expect_error("{{ xs.append(1) }}", "method list.append() is not supported", {{"xs", {1}}});
  expect_error("{{ '%s' % 1 }}", "printf-style string formatting");
}

TEST(JinjaErrors, MalformedTemplatesNameWhere) {
  expect_error("a\n\n{% if x %}never closed", "line 3 col 4: unterminated 'if' block: no '{% endif %}'");
  expect_error("{% for x in xs %}{{ x }}", "unterminated 'for' block");
  expect_error("text {{ x ", "line 1 col 6: unterminated tag: '{{' without '}}'");
  expect_error("{% if x", "unterminated tag: '{%' without '%}'");
  expect_error("a {# comment", "line 1 col 3: unterminated comment");
  expect_error("{{ 'abc }}", "unterminated string literal");
  expect_error("{% endfor %}", "unexpected '{% endfor %}'");
  expect_error("{% if x %}{% endfor %}", "unexpected '{% endfor %}'");
  expect_error("{% break %}", "'break' outside a for loop");
  expect_error("{{ 1 + }}", "expected an expression, found '}}'");
  expect_error("{{ a b }}", "expected '}}', found name 'b'");
  expect_error("{{ x ? 1 }}", "unexpected character '?'");
}

TEST(JinjaErrors, RuntimeErrorsNameTheLine) {
  expect_error("{% for m in messages %}\n{% if m.role == 'tool' %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
               "line 2 col 29: raise_exception: Only user and assistant roles are supported!",
               {{"messages", {{{"role", "user"}}, {{"role", "tool"}}}}});
  expect_error("{{ x() }}", "'int' object is not callable", {{"x", 1}});
  expect_error("{{ nothing() }}", "'nothing' is undefined (called as a function)");
  expect_error("\n{{ 1 + 'a' }}", "line 2 col 6: unsupported operand type(s) for +: 'int' and 'str'");
  expect_error("{{ missing.attr }}", "'missing' is undefined (reading its attribute 'attr')");
  expect_error("{{ missing['k'] }}", "'missing' is undefined");
  expect_error("{{ missing + 1 }}", "'missing' is undefined");
  expect_error("{{ 1 // 0 }}", "integer division or modulo by zero");
  expect_error("{{ none.content.strip() }}", "'content' is undefined (reading its attribute 'strip')");
  expect_error("{% set x = 1 %}{% set x.a = 2 %}", "only namespace() objects take `set x.attr = ...`");
  expect_error("{% for a, b in [1, 2] %}{% endfor %}", "cannot unpack");
  expect_error("{% for x in 5 %}{% endfor %}", "'int' object is not iterable");
  expect_error("{{ {'a': missing} | tojson }}", "not JSON serializable");
  expect_error("{% set ns = namespace(a=1) %}{{ ns | tojson }}", "Object of type Namespace is not JSON serializable");
  expect_error("{{ 'Élan' | upper }}", "upper() of non-ASCII text is not supported");
  expect_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "macro 'm' takes not more than 1 argument(s)");
  expect_error("{{ 'x'.split('') }}", "empty separator");
}

}  // namespace
}  // namespace moerl::jinja
