// Behaviours beyond the jinja2 fixture cases, each checked against what jinja2 (Python)
// prints for the same template: Python reprs, float formatting, loop variables, scoping,
// macros, and the less common filters and methods.
#include <gtest/gtest.h>

#include "model/jinja/template.h"

namespace moerl::jinja {
namespace {

std::string render(const std::string& tmpl, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object()) {
  return Template(tmpl).render(ctx);
}

TEST(JinjaBehaviour, PythonReprsAndFloats) {
  EXPECT_EQ(render("{{ [\"it's\", 'a\"b', 'n\\nl'] }}"), R"(["it's", 'a"b', 'n\nl'])");
  EXPECT_EQ(render("{{ (1,) }} {{ (1, 'a') }} {{ {'k': none, 1: true} }}"), "(1,) (1, 'a') {'k': None, 1: True}");
  EXPECT_EQ(render("{{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1.5e-7 }} {{ -2.5 }} {{ 3.0 * 2 }}"),
            "1e+16 1000000000000000.0 0.0001 1e-05 1.5e-07 -2.5 6.0");
  EXPECT_EQ(render("{{ 7 / 7 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** -1 }} {{ 7.5 // 2 }}"), "1.0 -4 2 0.5 3.0");
  EXPECT_EQ(render("{{ x }}|{{ x | tojson }}", {{"x", 0.1}}), "0.1|0.1");
  EXPECT_EQ(render("{{ x | tojson }}", {{"x", {{"é", {1.0, nullptr, "\u0001\t"}}}}}), "{\"é\": [1.0, null, \"\\u0001\\t\"]}");
  EXPECT_EQ(render("{{ [] | tojson(indent=2) }}{{ {} | tojson }}"), "[]{}");
}

TEST(JinjaBehaviour, LoopsAndScopes) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.revindex0 }}{{ loop.nextitem | default('-') }}{% endfor %}"), "2b1c0-");
  EXPECT_EQ(render("{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
                   {{"xs", {1, 2, 3, 4, 5}}}),
            "13");
  EXPECT_EQ(render("{% for x in xs if x > 1 %}{{ loop.index }}/{{ loop.length }} {% endfor %}", {{"xs", {1, 2, 3}}}), "1/2 2/2 ");
  EXPECT_EQ(render("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}"), "37");
  EXPECT_EQ(render("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");  // if opens no scope
  EXPECT_EQ(render("{% for x in [1] %}{% set y = 5 %}{% endfor %}[{{ y }}]"), "[]");
  EXPECT_EQ(render("{% set a = 0 %}{% for x in [1, 2] %}{{ a }}{% set a = x %}{% endfor %}{{ a }}"), "000");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set t %}in {{ 1 + 1 }}{% endset %}[{{ t }}]"), "[in 2]");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}none{% endfor %}"), "none");
}

TEST(JinjaBehaviour, MacrosSeeTemplateVariables) {
  EXPECT_EQ(render("{% macro show(m, sep=': ') %}{{ m.role }}{{ sep }}{{ m.content }}{{ tail }}{% endmacro %}"
                   "{% for m in messages %}{{ show(m) }}|{{ show(m, sep='=') }}{% endfor %}",
                   {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"tail", "!"}}),
            "user: hi!|user=hi!");
}

TEST(JinjaBehaviour, FiltersAndMethods) {
  EXPECT_EQ(render("{{ ['b', 'A', 'a', 'c'] | unique | list }} {{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }}"),
            "['b', 'A', 'c'] [1, 2, 3] [3, 2, 1]");
  EXPECT_EQ(render("{{ [1, 2, 3, 4, 5] | batch(2) | list }}"), "[[1, 2], [3, 4], [5]]");
  EXPECT_EQ(render("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'x' | indent(2, true) }}"), "a\n  b\n\n  c|  x");
  EXPECT_EQ(render("{{ '<a href=\"x\">&</a>' | e }}"), "&lt;a href=&#34;x&#34;&gt;&amp;&lt;/a&gt;");
  EXPECT_EQ(render("{{ 'hello world-wide' | title }} {{ 'hELLO' | capitalize }} {{ 'x' | d('y') }} {{ '' | d('y', true) }}"),
            "Hello World-Wide Hello x y");
  EXPECT_EQ(render("{{ '42' | int + 1 }} {{ 'x' | int }} {{ '2.5' | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }}"),
            "43 0 2.5 3 2.57 2.0 4.0");
  EXPECT_EQ(render("{{ ms | rejectattr('role', 'eq', 'system') | map(attribute='role') | join(',') }}",
                   {{"ms", {{{"role", "system"}}, {{"role", "user"}}, {{"role", "assistant"}}}}}),
            "user,assistant");
  EXPECT_EQ(render("{{ [1, 2, 3, 4] | select('odd') | list }} {{ [0, 1, none, 'a'] | reject | list }} {{ ['a', 'b'] | map('upper') | list }}"),
            "[1, 3] [0, None] ['A', 'B']");
  EXPECT_EQ(render("{{ d | items | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d | length }}", {{"d", {{"a", 1}, {"b", 2}}}}),
            "[('a', 1), ('b', 2)] ['a', 'b'] [1, 2] 2");
  EXPECT_EQ(render("{{ ' a  b c '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'x\\r\\ny\\n'.splitlines() }}"),
            "['a', 'b', 'c'] ['a', 'b,c'] ['a,b', 'c'] ['x', 'y']");
  EXPECT_EQ(render("{{ 'héllo'.find('l') }} {{ 'banana'.count('an') }} {{ '-'.join(['a', 'b']) }} {{ 'xxaxx'.strip('x') }} {{ 'héllo' | length }} {{ 'héllo'[1] }}"),
            "2 2 a-b a 5 é");
  EXPECT_EQ(render("{{ d.items() }} {{ d.keys() }} {{ d.values() | list }}", {{"d", {{"a", 1}}}}),
            "dict_items([('a', 1)]) dict_keys(['a']) [1]");
  EXPECT_EQ(render("{{ [1, 2, 2].count(2) }} {{ [1, 2].index(2) }} {{ {'a': 1}.get('b') }} {{ 'ab'.upper() }}"), "2 1 None AB");
  EXPECT_EQ(render("{{ xs[-1] }} {{ xs[5] is defined }} {{ xs[1:-1] }} {{ xs[::2] }} {{ 'abc'[-2:] }}", {{"xs", {1, 2, 3, 4}}}),
            "4 False [2, 3] [1, 3] bc");
}

TEST(JinjaBehaviour, TestsAndOperators) {
  EXPECT_EQ(render("{{ true is number }} {{ true is integer }} {{ 1 is integer }} {{ 1.0 is float }} {{ 'a' is sequence }} "
                   "{{ 6 is divisibleby 3 }} {{ 6 is divisibleby(4) }} {{ x is not none }} {{ 1 is eq 1.0 }} {{ 2 is ne 2 }}",
                   {{"x", nullptr}}),
            "True False True True True True False False True False");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ true == 1 }}"),
            "True False True True True True");
  EXPECT_EQ(render("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ none or [] }} {{ not none }} {{ 'ab' * 2 }} {{ [1] + [2] }}"),
            "x y [] True abab [1, 2]");
  EXPECT_EQ(render("{{ -x | abs }} {{ xs | length - 1 }}", {{"x", 3}, {"xs", {1, 2}}}), "3 1");
  EXPECT_EQ(render("{{ 'a' 'b' }}{{ 'c' if false }}{{ x.y is defined }}", {{"x", {{"z", 1}}}}), "abFalse");
  EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% set ns.b = ns.a + 1 %}{{ ns.b }} {{ range(3) | list }} {{ range(1, 7, 2) | list }}"),
            "2 [0, 1, 2] [1, 3, 5]");
  EXPECT_EQ(render("{{ strftime_now('%Y') | length }}"), "4");
}

TEST(JinjaBehaviour, Whitespace) {
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n  y\n"), "  x\n  y");
  EXPECT_EQ(render("a\n  {#- c -#}\n  b"), "ab");
  EXPECT_EQ(render("a\n  {%+ if true %}b{% endif +%}\nc"), "a\n  b\nc");
  EXPECT_EQ(render("{{ 'x' }}\n{{ 'y' }}"), "x\ny");  // no trim after }}
  EXPECT_EQ(render("a\r\nb\r\n"), "a\nb");
  EXPECT_EQ(render("{{ {'a': {'b': 1}} }}"), "{'a': {'b': 1}}");
}

}  // namespace
}  // namespace moerl::jinja
