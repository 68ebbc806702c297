// A Jinja template as transformers renders chat templates (jinja2's sandboxed environment
// with trim_blocks, lstrip_blocks, loopcontrols, raise_exception, strftime_now, and a
// tojson that keeps non-ASCII text). moerl's own interpreter of the subset chat templates
// use; docs/formats/tokenizer.md lists it.
//
//   jinja::Template t("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}");
//   std::string s = t.render({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
//   // "<|user|>Hi"
//
// The constructor throws moerl::Error naming line and column for a syntax error, an
// unsupported tag, or an unknown filter or test (as jinja2 does at compile time, even in a
// branch not taken); render() throws moerl::Error naming line and column for a runtime
// error (raise_exception, a call of something not callable, a bad operand type, an
// attribute of an undefined value). Immutable after construction: render is thread-safe.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace moerl::jinja {

struct Stmt;

class Template {
 public:
  explicit Template(const std::string& source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // `context` must be a JSON object; its keys are the template's variables.
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moerl::jinja
