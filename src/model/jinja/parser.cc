#include "model/jinja/parser.h"

#include <algorithm>

#include "model/jinja/expr_parser.h"

namespace moerl::jinja {

namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : ts_(std::move(toks)), ex_(ts_) {}

  Body parse_template() {
    Body body = parse_body({}, "", {});
    if (ts_.peek().kind != Tok::kEof) ts_.fail("unexpected " + describe(ts_.peek()));
    return body;
  }

 private:
  // Parses statements until `{% <one of stops> ...` (left unconsumed after the '{%').
  Body parse_body(const std::vector<std::string>& stops, const std::string& opener, Pos opened) {
    Body body;
    while (true) {
      const Token& t = ts_.peek();
      if (t.kind == Tok::kEof) {
        if (stops.empty()) return body;
        throw_at(opened, "unterminated '" + opener + "' block: no '{% " + stops.back() + " %}' before the end of the template");
      }
      if (t.kind == Tok::kText) {
        auto s = stmt(StmtKind::kText, t.pos);
        s->text = ts_.next().text;
        body.push_back(std::move(s));
      } else if (t.kind == Tok::kVarBegin) {
        auto s = stmt(StmtKind::kOutput, ts_.next().pos);
        s->expr = ex_.parse_tuple_or_expression();
        expect_end(Tok::kVarEnd, "'}}'");
        body.push_back(std::move(s));
      } else if (t.kind == Tok::kBlockBegin) {
        const Token& name = ts_.peek(1);
        if (name.kind == Tok::kName && std::find(stops.begin(), stops.end(), name.text) != stops.end()) {
          ts_.next();
          return body;
        }
        ts_.next();
        body.push_back(parse_statement());
      } else {
        ts_.fail("unexpected " + describe(t));
      }
    }
  }

  std::unique_ptr<Stmt> stmt(StmtKind kind, Pos pos) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->pos = pos;
    return s;
  }

  void expect_end(Tok kind, const char* what) {
    if (ts_.peek().kind != kind) ts_.fail(std::string("expected ") + what + ", found " + describe(ts_.peek()));
    ts_.next();
  }

  // After `{% name`: the end tag's name and the `%}`.
  void finish_tag(const char* name) {
    ts_.next();  // the end tag's name
    expect_end(Tok::kBlockEnd, ("'%}' after '" + std::string(name) + "'").c_str());
  }

  std::unique_ptr<Stmt> parse_statement() {
    const Token& t = ts_.peek();
    if (t.kind != Tok::kName) ts_.fail("expected a tag name after '{%', found " + describe(t));
    const std::string name = t.text;
    const Pos pos = t.pos;
    if (name == "if") return parse_if(pos);
    if (name == "for") return parse_for(pos);
    if (name == "set") return parse_set(pos);
    if (name == "macro") return parse_macro(pos);
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) throw_at(pos, "'" + name + "' outside a for loop");
      ts_.next();
      expect_end(Tok::kBlockEnd, "'%}'");
      return stmt(name == "break" ? StmtKind::kBreak : StmtKind::kContinue, pos);
    }
    if (name == "generation") {  // transformers' assistant-mask extension: renders its body
      ts_.next();
      expect_end(Tok::kBlockEnd, "'%}'");
      auto s = stmt(StmtKind::kBlock, pos);
      s->body = parse_body({"endgeneration"}, "generation", pos);
      finish_tag("endgeneration");
      return s;
    }
    if (name.rfind("end", 0) == 0 || name == "else" || name == "elif") {
      throw_at(pos, "unexpected '{% " + name + " %}' with no open block it could close");
    }
    throw_at(pos, "unsupported tag '{% " + name + " %}'",
             "moerl's chat-template interpreter supports the tags if, for, set, macro, break, continue and "
             "generation (docs/formats/tokenizer.md); render this template with transformers instead");
  }

  std::unique_ptr<Stmt> parse_if(Pos pos) {
    ts_.next();
    auto s = stmt(StmtKind::kIf, pos);
    ExprPtr cond = ex_.parse_tuple_or_expression();
    expect_end(Tok::kBlockEnd, "'%}' after the if condition");
    while (true) {
      Body body = parse_body({"elif", "else", "endif"}, "if", pos);
      s->branches.emplace_back(std::move(cond), std::move(body));
      const std::string tag = ts_.next().text;
      if (tag == "elif") {
        cond = ex_.parse_tuple_or_expression();
        expect_end(Tok::kBlockEnd, "'%}' after the elif condition");
        continue;
      }
      expect_end(Tok::kBlockEnd, ("'%}' after '" + tag + "'").c_str());
      if (tag == "else") {
        s->else_body = parse_body({"endif"}, "if", pos);
        finish_tag("endif");
      }
      return s;
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool paren = ts_.skip_op("(");
    do {
      names.push_back(ts_.expect_name());
    } while (ts_.skip_op(","));
    if (paren) ts_.expect_op(")");
    return names;
  }

  std::unique_ptr<Stmt> parse_for(Pos pos) {
    ts_.next();
    auto s = stmt(StmtKind::kFor, pos);
    s->targets = parse_targets();
    if (!ts_.skip_name("in")) ts_.fail("expected 'in' in the for tag, found " + describe(ts_.peek()));
    s->expr = ex_.parse_or();
    if (ts_.is_op(",")) ts_.fail("iterating over a bare tuple (`for x in a, b`) is not supported; use [a, b]");
    if (ts_.skip_name("if")) s->filter = ex_.parse_or();
    if (ts_.is_name("recursive")) ts_.fail("recursive for loops are not supported");
    expect_end(Tok::kBlockEnd, "'%}' after the for tag");
    ++loop_depth_;
    s->body = parse_body({"else", "endfor"}, "for", pos);
    --loop_depth_;
    const std::string tag = ts_.next().text;
    expect_end(Tok::kBlockEnd, ("'%}' after '" + tag + "'").c_str());
    if (tag == "else") {
      s->else_body = parse_body({"endfor"}, "for", pos);
      finish_tag("endfor");
    }
    return s;
  }

  std::unique_ptr<Stmt> parse_set(Pos pos) {
    ts_.next();
    auto s = stmt(StmtKind::kSet, pos);
    if (ts_.peek().kind == Tok::kName && ts_.is_op(".", 1)) {
      s->attr_target = true;
      s->targets.push_back(ts_.next().text);
      ts_.next();
      s->targets.push_back(ts_.expect_name());
    } else {
      s->targets = parse_targets();
    }
    if (ts_.peek().kind == Tok::kBlockEnd) {  // {% set x %}...{% endset %}
      if (s->attr_target || s->targets.size() != 1) ts_.fail("a block set takes one plain name");
      ts_.next();
      s->kind = StmtKind::kSetBlock;
      s->text = s->targets[0];
      s->body = parse_body({"endset"}, "set", pos);
      finish_tag("endset");
      return s;
    }
    if (ts_.is_op("|")) ts_.fail("filters on a block set are not supported");
    ts_.expect_op("=");
    s->expr = ex_.parse_tuple_or_expression();
    expect_end(Tok::kBlockEnd, "'%}' after the set value");
    return s;
  }

  std::unique_ptr<Stmt> parse_macro(Pos pos) {
    ts_.next();
    auto s = stmt(StmtKind::kMacro, pos);
    s->text = ts_.expect_name();
    ts_.expect_op("(");
    while (!ts_.is_op(")")) {
      std::string p = ts_.expect_name();
      ExprPtr dflt = ts_.skip_op("=") ? ex_.parse_expression() : nullptr;
      s->params.emplace_back(std::move(p), std::move(dflt));
      if (!ts_.skip_op(",")) break;
    }
    ts_.expect_op(")");
    expect_end(Tok::kBlockEnd, "'%}' after the macro signature");
    const int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_body({"endmacro"}, "macro", pos);
    loop_depth_ = saved;
    finish_tag("endmacro");
    return s;
  }

  TokenStream ts_;
  ExprParser ex_;
  int loop_depth_ = 0;
};

}  // namespace

Body parse(std::vector<Token> tokens) { return Parser(std::move(tokens)).parse_template(); }

}  // namespace moerl::jinja
