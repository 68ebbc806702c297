// Renders a parsed template: statements in order, with jinja2's scoping (a for loop or a
// macro call opens a scope, `set` writes the innermost one, namespace() objects are shared
// references so `set ns.x` inside a loop is seen after it).
//
//   std::string out = render_body(parse(lex(src)), vars);   // vars: globals + context
//
// Throws moerl::Error naming the line and column of the expression or tag that failed.
#pragma once

#include <string>

#include "model/jinja/ast.h"

namespace moerl::jinja {

std::string render_body(const Body& body, Dict vars);

}  // namespace moerl::jinja
