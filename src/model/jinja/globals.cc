// The globals transformers' environment offers templates: namespace(), raise_exception(msg)
// (throws, the message surfaces in the moerl::Error), strftime_now(fmt), and jinja2's range()
// and dict().
#include <ctime>

#include "model/jinja/builtins.h"
#include "model/jinja/error.h"

namespace moerl::jinja {

namespace {

Value kwargs_dict(CallArgs& a, const char* fn) {
  Dict d;
  for (const Value& p : a.pos) {  // namespace({'a': 1}) / dict({'a': 1})
    if (!p.is_dict()) throw TypeError(std::string(fn) + "() takes keyword arguments or one dict");
    for (const auto& [k, v] : p.as_dict().items) d.set(k, v);
  }
  for (auto& [k, v] : a.kw) d.set(Value(k), v);
  return Value::dict(std::move(d));
}

}  // namespace

Dict make_globals() {
  Dict g;
  g.set(Value("namespace"), Value::callable("namespace", [](CallArgs& a) {
          auto ns = std::make_shared<Namespace>();
          ns->attrs = kwargs_dict(a, "namespace").as_dict();
          return Value(Value::Data(std::move(ns)));
        }));
  g.set(Value("dict"), Value::callable("dict", [](CallArgs& a) { return kwargs_dict(a, "dict"); }));
  g.set(Value("raise_exception"), Value::callable("raise_exception", [](CallArgs& a) -> Value {
          Params p("raise_exception", a, {"message"});
          throw TypeError("raise_exception: " + p.get(0).str(),
                          "the chat template rejected these messages (its own check, as transformers would raise "
                          "TemplateError); fix the conversation's roles or fields");
        }));
  g.set(Value("strftime_now"), Value::callable("strftime_now", [](CallArgs& a) {
          Params p("strftime_now", a, {"format"});
          const std::time_t now = std::time(nullptr);
          std::tm tm{};
          localtime_r(&now, &tm);
          char buf[256];
          const size_t n = std::strftime(buf, sizeof buf, p.get_str(0, "").c_str(), &tm);
          return Value(std::string(buf, n));
        }));
  g.set(Value("range"), Value::callable("range", [](CallArgs& a) {
          Params p("range", a, {"start", "stop", "step"});
          int64_t start = 0, stop = p.get_int(0, 0), step = p.get_int(2, 1);
          if (p.has(1)) {
            start = stop;
            stop = p.get_int(1, 0);
          }
          if (step == 0) throw TypeError("range() arg 3 must not be zero");
          std::vector<Value> out;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            out.emplace_back(i);
            if (out.size() > 100000) throw TypeError("range() longer than 100000 items");
          }
          return Value::list(std::move(out));
        }));
  return g;
}

}  // namespace moerl::jinja
