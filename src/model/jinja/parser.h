// Jinja statement parser: tokens to a tree of statements. Tags: if/elif/else, for (with
// else, an `if` clause and tuple targets), set (name, ns.attr, tuple, block form), macro,
// break/continue (inside loops only) and transformers' generation block.
//
//   Body body = parse(lex("{% for m in messages %}{{ m.content }}{% endfor %}"));
//
// Any other tag (include, call, filter, raw, ...), a missing end tag or a stray one throws
// moerl::Error naming its line and column.
#pragma once

#include "model/jinja/ast.h"
#include "model/jinja/lexer.h"

namespace moerl::jinja {

Body parse(std::vector<Token> tokens);

}  // namespace moerl::jinja
