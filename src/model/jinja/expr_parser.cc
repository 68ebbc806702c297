#include "model/jinja/expr_parser.h"

namespace moerl::jinja {

namespace {

ExprPtr make(ExprKind kind, Pos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

}  // namespace

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::kText: return "text";
    case Tok::kVarBegin: return "'{{'";
    case Tok::kVarEnd: return "'}}'";
    case Tok::kBlockBegin: return "'{%'";
    case Tok::kBlockEnd: return "'%}'";
    case Tok::kName: return "name '" + t.text + "'";
    case Tok::kString: return "string literal";
    case Tok::kInt:
    case Tok::kFloat: return "number " + t.text;
    case Tok::kOp: return "'" + t.text + "'";
    case Tok::kEof: return "end of template";
  }
  return "token";
}

bool TokenStream::skip_op(const char* op) {
  if (!is_op(op)) return false;
  next();
  return true;
}

bool TokenStream::skip_name(const char* name) {
  if (!is_name(name)) return false;
  next();
  return true;
}

void TokenStream::expect_op(const char* op) {
  if (!skip_op(op)) fail(std::string("expected '") + op + "', found " + describe(peek()));
}

std::string TokenStream::expect_name() {
  if (peek().kind != Tok::kName) fail("expected a name, found " + describe(peek()));
  return next().text;
}

void TokenStream::fail(const std::string& what) const { throw_at(peek().pos, what); }

ExprPtr ExprParser::binary(ExprPtr l, const std::string& op, ExprPtr r, Pos pos) {
  auto e = make(ExprKind::kBinary, pos);
  e->name = op;
  e->args.push_back(std::move(l));
  e->args.push_back(std::move(r));
  return e;
}

ExprPtr ExprParser::parse_tuple_or_expression() {
  const Pos pos = ts_.peek().pos;
  ExprPtr first = parse_expression();
  if (!ts_.is_op(",")) return first;
  auto t = make(ExprKind::kList, pos);
  t->flag = true;
  t->args.push_back(std::move(first));
  while (ts_.skip_op(",")) {
    if (ts_.peek().kind == Tok::kBlockEnd || ts_.peek().kind == Tok::kVarEnd || ts_.is_op(")")) break;
    t->args.push_back(parse_expression());
  }
  return t;
}

ExprPtr ExprParser::parse_expression() {
  ExprPtr e = parse_or();
  while (ts_.is_name("if")) {
    const Pos pos = ts_.next().pos;
    auto c = make(ExprKind::kCond, pos);
    c->args.push_back(std::move(e));
    c->args.push_back(parse_or());
    c->args.push_back(ts_.skip_name("else") ? parse_expression() : nullptr);
    e = std::move(c);
  }
  return e;
}

ExprPtr ExprParser::parse_or() {
  ExprPtr e = parse_and();
  while (ts_.is_name("or")) {
    const Pos pos = ts_.next().pos;
    e = binary(std::move(e), "or", parse_and(), pos);
  }
  return e;
}

ExprPtr ExprParser::parse_and() {
  ExprPtr e = parse_not();
  while (ts_.is_name("and")) {
    const Pos pos = ts_.next().pos;
    e = binary(std::move(e), "and", parse_not(), pos);
  }
  return e;
}

ExprPtr ExprParser::parse_not() {
  if (ts_.is_name("not")) {
    auto e = make(ExprKind::kUnary, ts_.next().pos);
    e->name = "not";
    e->args.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr ExprParser::parse_compare() {
  const Pos pos = ts_.peek().pos;
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    const Token& t = ts_.peek();
    if (t.kind == Tok::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" ||
                               t.text == ">" || t.text == ">=")) {
      op = ts_.next().text;
    } else if (ts_.is_name("in")) {
      ts_.next();
      op = "in";
    } else if (ts_.is_name("not") && ts_.is_name("in", 1)) {
      ts_.next();
      ts_.next();
      op = "not in";
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(ExprKind::kCompare, pos);
      cmp->args.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->args.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr ExprParser::parse_math1() {
  ExprPtr e = parse_concat();
  while (ts_.is_op("+") || ts_.is_op("-")) {
    const Token& t = ts_.next();
    e = binary(std::move(e), t.text, parse_concat(), t.pos);
  }
  return e;
}

ExprPtr ExprParser::parse_concat() {
  ExprPtr e = parse_math2();
  while (ts_.is_op("~")) {
    const Pos pos = ts_.next().pos;
    e = binary(std::move(e), "~", parse_math2(), pos);
  }
  return e;
}

ExprPtr ExprParser::parse_math2() {
  ExprPtr e = parse_pow();
  while (ts_.is_op("*") || ts_.is_op("/") || ts_.is_op("//") || ts_.is_op("%")) {
    const Token& t = ts_.next();
    e = binary(std::move(e), t.text, parse_pow(), t.pos);
  }
  return e;
}

ExprPtr ExprParser::parse_pow() {
  ExprPtr e = parse_unary(true);
  while (ts_.is_op("**")) {
    const Pos pos = ts_.next().pos;
    e = binary(std::move(e), "**", parse_unary(true), pos);
  }
  return e;
}

ExprPtr ExprParser::parse_unary(bool with_filter) {
  ExprPtr e;
  if (ts_.is_op("-") || ts_.is_op("+")) {
    const Token& t = ts_.next();
    e = make(ExprKind::kUnary, t.pos);
    e->name = t.text;
    e->args.push_back(parse_unary(false));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  return with_filter ? parse_filter_expr(std::move(e)) : std::move(e);
}

ExprPtr ExprParser::parse_primary() {
  const Token t = ts_.next();
  if (t.kind == Tok::kName) {
    auto e = make(ExprKind::kLiteral, t.pos);
    if (t.text == "true" || t.text == "True") {
      e->value = Value(true);
    } else if (t.text == "false" || t.text == "False") {
      e->value = Value(false);
    } else if (t.text == "none" || t.text == "None") {
      e->value = Value(None{});
    } else {
      e->kind = ExprKind::kName;
      e->name = t.text;
    }
    return e;
  }
  if (t.kind == Tok::kString) {
    std::string s = t.text;
    while (ts_.peek().kind == Tok::kString) s += ts_.next().text;  // adjacent literals join
    auto e = make(ExprKind::kLiteral, t.pos);
    e->value = Value(std::move(s));
    return e;
  }
  if (t.kind == Tok::kInt || t.kind == Tok::kFloat) {
    auto e = make(ExprKind::kLiteral, t.pos);
    try {
      e->value = t.kind == Tok::kInt ? Value(static_cast<int64_t>(std::stoll(t.text))) : Value(std::stod(t.text));
    } catch (const std::exception&) {
      throw_at(t.pos, "number " + t.text + " is out of range");
    }
    return e;
  }
  if (t.kind == Tok::kOp && t.text == "(") {
    if (ts_.skip_op(")")) {
      auto e = make(ExprKind::kList, t.pos);
      e->flag = true;
      return e;
    }
    ExprPtr e = parse_tuple_or_expression();
    ts_.expect_op(")");
    return e;
  }
  if (t.kind == Tok::kOp && t.text == "[") {
    auto e = make(ExprKind::kList, t.pos);
    while (!ts_.is_op("]")) {
      e->args.push_back(parse_expression());
      if (!ts_.skip_op(",")) break;
    }
    ts_.expect_op("]");
    return e;
  }
  if (t.kind == Tok::kOp && t.text == "{") {
    auto e = make(ExprKind::kDict, t.pos);
    while (!ts_.is_op("}")) {
      e->args.push_back(parse_expression());
      ts_.expect_op(":");
      e->args.push_back(parse_expression());
      if (!ts_.skip_op(",")) break;
    }
    ts_.expect_op("}");
    return e;
  }
  throw_at(t.pos, "expected an expression, found " + describe(t));
}

ExprPtr ExprParser::parse_postfix(ExprPtr e) {
  while (true) {
    if (ts_.is_op(".")) {
      const Pos pos = ts_.next().pos;
      auto a = make(ExprKind::kAttr, pos);
      if (ts_.peek().kind == Tok::kInt) {  // xs.0 is xs[0]
        a->kind = ExprKind::kItem;
        auto idx = make(ExprKind::kLiteral, ts_.peek().pos);
        idx->value = Value(static_cast<int64_t>(std::stoll(ts_.next().text)));
        a->args.push_back(std::move(e));
        a->args.push_back(std::move(idx));
      } else {
        a->name = ts_.expect_name();
        a->args.push_back(std::move(e));
      }
      e = std::move(a);
    } else if (ts_.is_op("[")) {
      const Pos pos = ts_.next().pos;
      e = parse_subscript(std::move(e), pos);
    } else if (ts_.is_op("(")) {
      ts_.next();
      auto c = make(ExprKind::kCall, e->pos);  // errors point at the callee
      c->args.push_back(std::move(e));
      parse_call_args(*c);
      e = std::move(c);
    } else {
      return e;
    }
  }
}

ExprPtr ExprParser::parse_subscript(ExprPtr e, Pos pos) {
  ExprPtr parts[3];
  int n = 0;
  bool is_slice = false;
  while (true) {
    if (!ts_.is_op(":") && !ts_.is_op("]")) parts[n] = parse_expression();
    if (n < 2 && ts_.skip_op(":")) {
      is_slice = true;
      ++n;
      continue;
    }
    break;
  }
  ts_.expect_op("]");
  auto s = make(is_slice ? ExprKind::kSlice : ExprKind::kItem, pos);
  s->args.push_back(std::move(e));
  if (!is_slice && !parts[0]) throw_at(pos, "empty subscript []");
  for (int i = 0; i < (is_slice ? 3 : 1); ++i) s->args.push_back(std::move(parts[i]));
  return s;
}

void ExprParser::parse_call_args(Expr& call) {
  while (!ts_.is_op(")")) {
    if (ts_.is_op("*") || ts_.is_op("**")) ts_.fail("*args and **kwargs in calls are not supported");
    if (ts_.peek().kind == Tok::kName && ts_.is_op("=", 1)) {
      std::string name = ts_.next().text;
      ts_.next();
      call.kwargs.emplace_back(std::move(name), parse_expression());
    } else {
      if (!call.kwargs.empty()) ts_.fail("positional argument after a keyword argument");
      call.args.push_back(parse_expression());
    }
    if (!ts_.skip_op(",")) break;
  }
  ts_.expect_op(")");
}

ExprPtr ExprParser::parse_filter_expr(ExprPtr e) {
  while (true) {
    if (ts_.is_op("|")) {
      const Pos pos = ts_.next().pos;
      auto f = make(ExprKind::kFilter, pos);
      f->name = ts_.expect_name();
      f->args.push_back(std::move(e));
      if (ts_.skip_op("(")) parse_call_args(*f);
      e = std::move(f);
    } else if (ts_.is_name("is")) {
      const Pos pos = ts_.next().pos;
      auto t = make(ExprKind::kTest, pos);
      t->flag = ts_.skip_name("not");
      t->name = ts_.expect_name();
      t->args.push_back(std::move(e));
      const Token& n = ts_.peek();
      if (ts_.skip_op("(")) {
        parse_call_args(*t);
      } else if ((n.kind == Tok::kName && n.text != "else" && n.text != "or" && n.text != "and" && n.text != "if" &&
                  n.text != "is" && n.text != "in" && n.text != "not") ||
                 n.kind == Tok::kString || n.kind == Tok::kInt || n.kind == Tok::kFloat || ts_.is_op("[") ||
                 ts_.is_op("{")) {
        t->args.push_back(parse_postfix(parse_primary()));  // `x is divisibleby 3`
      }
      e = std::move(t);
    } else if (ts_.is_op("(")) {
      ts_.next();
      auto c = make(ExprKind::kCall, e->pos);  // errors point at the callee
      c->args.push_back(std::move(e));
      parse_call_args(*c);
      e = std::move(c);
    } else {
      return e;
    }
  }
}

}  // namespace moerl::jinja
