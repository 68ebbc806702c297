// Expression parsing with Jinja's precedence (lowest first): `x if c else y`, or, and,
// not, comparisons and `in` (chained), + -, ~, * / // %, **, unary - +, then postfix
// (.attr, [item], [a:b:c], call) with filters `|f(...)` and tests `is [not] t` binding
// tighter than any binary operator (`xs|length - 1` is `(xs|length) - 1`).
//
//   TokenStream ts(lex("{{ a.b[0] | upper }}"));  ts.next();  // past kVarBegin
//   ExprPtr e = ExprParser(ts).parse_expression();
//
// Throws moerl::Error naming line and column for a token that cannot start or continue
// an expression.
#pragma once

#include <vector>

#include "model/jinja/ast.h"
#include "model/jinja/lexer.h"

namespace moerl::jinja {

class TokenStream {
 public:
  explicit TokenStream(std::vector<Token> toks) : toks_(std::move(toks)) {}
  const Token& peek(size_t ahead = 0) const { return toks_[std::min(i_ + ahead, toks_.size() - 1)]; }
  const Token& next() { return toks_[i_ < toks_.size() - 1 ? i_++ : i_]; }
  bool is_op(const char* op, size_t ahead = 0) const { return peek(ahead).kind == Tok::kOp && peek(ahead).text == op; }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == Tok::kName && peek(ahead).text == name;
  }
  bool skip_op(const char* op);
  bool skip_name(const char* name);
  void expect_op(const char* op);
  std::string expect_name();
  [[noreturn]] void fail(const std::string& what) const;

 private:
  std::vector<Token> toks_;
  size_t i_ = 0;
};

std::string describe(const Token& t);  // "name 'x'", "'%}'", "end of template"

class ExprParser {
 public:
  explicit ExprParser(TokenStream& ts) : ts_(ts) {}
  ExprPtr parse_expression();                    // with `x if c else y`
  ExprPtr parse_tuple_or_expression();           // `a, b` as a tuple
  ExprPtr parse_or();                            // no inline if (for `for ... if` clauses)

 private:
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_filter_expr(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr e, Pos pos);
  void parse_call_args(Expr& call);
  ExprPtr binary(ExprPtr l, const std::string& op, ExprPtr r, Pos pos);

  TokenStream& ts_;
};

}  // namespace moerl::jinja
