// Jinja lexer: template source to tokens, applying the whitespace rules transformers renders
// chat templates with: trim_blocks and lstrip_blocks on, `-`/`+` tag modifiers, {# #}
// comments dropped, one trailing newline of the source dropped, newlines normalised to \n.
//
//   std::vector<Token> toks = lex("Hi {{ name }}!");
//   // kText "Hi ", kVarBegin, kName "name", kVarEnd, kText "!", kEof
//
// Throws moerl::Error naming line and column for an unterminated tag, comment or string
// and for a character that starts no token.
#pragma once

#include <string>
#include <vector>

#include "model/jinja/error.h"

namespace moerl::jinja {

enum class Tok { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok kind;
  std::string text;  // text, name, decoded string literal, number or operator
  Pos pos;
};

std::vector<Token> lex(const std::string& source);

}  // namespace moerl::jinja
