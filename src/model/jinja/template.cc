#include "model/jinja/template.h"

#include "base/error.h"
#include "model/jinja/builtins.h"
#include "model/jinja/evaluator.h"
#include "model/jinja/parser.h"

namespace moerl::jinja {

namespace {

// jinja2 resolves filter and test names when it compiles a template.
void check_names(const Expr& e) {
  if (e.kind == ExprKind::kFilter && !has_filter(e.name)) {
    throw_at(e.pos, "unknown filter '" + e.name + "'",
             "moerl's chat-template interpreter implements the filters chat templates use "
             "(docs/formats/tokenizer.md); render this template with transformers instead");
  }
  if (e.kind == ExprKind::kTest && !has_test(e.name)) {
    throw_at(e.pos, "unknown test '" + e.name + "'",
             "moerl's chat-template interpreter implements jinja2's common tests (docs/formats/tokenizer.md)");
  }
  for (const auto& a : e.args) {
    if (a) check_names(*a);
  }
  for (const auto& [k, v] : e.kwargs) check_names(*v);
}

void check_names(const Body& body) {
  for (const auto& s : body) {
    for (const Expr* e : {s->expr.get(), s->filter.get()}) {
      if (e) check_names(*e);
    }
    for (const auto& [cond, b] : s->branches) {
      check_names(*cond);
      check_names(b);
    }
    for (const auto& [name, dflt] : s->params) {
      if (dflt) check_names(*dflt);
    }
    check_names(s->body);
    check_names(s->else_body);
  }
}

}  // namespace

struct Template::Impl {
  Body body;
};

Template::Template(const std::string& source) : impl_(std::make_unique<Impl>()) {
  impl_->body = parse(lex(source));
  check_names(impl_->body);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) throw Error("chat template context must be a JSON object, got " + context.dump(), "");
  Dict vars = make_globals();
  for (const auto& [k, v] : context.items()) vars.set(Value(k), Value::from_json(v));
  return render_body(impl_->body, std::move(vars));
}

}  // namespace moerl::jinja
