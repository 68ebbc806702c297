#include "model/jinja/evaluator.h"

#include <unordered_map>

#include "model/jinja/builtins.h"

namespace moerl::jinja {

namespace {

constexpr int kMaxMacroDepth = 100;

class Renderer {
 public:
  explicit Renderer(Dict vars) {
    frames_.emplace_back();
    for (auto& [k, v] : vars.items) frames_.back()[k.as_string()] = std::move(v);
  }

  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec(const Body& body, std::string& out) {
    for (const auto& s : body) {
      const Flow f = exec_stmt(*s, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

 private:
  using Frame = std::unordered_map<std::string, Value>;

  Flow exec_stmt(const Stmt& s, std::string& out) {
    switch (s.kind) {
      case StmtKind::kText: out += s.text; return Flow::kNormal;
      case StmtKind::kOutput: out += eval(*s.expr).str(); return Flow::kNormal;
      case StmtKind::kIf:
        for (const auto& [cond, body] : s.branches) {
          if (eval(*cond).truthy()) return exec(body, out);
        }
        return exec(s.else_body, out);
      case StmtKind::kFor: exec_for(s, out); return Flow::kNormal;
      case StmtKind::kSet: exec_set(s); return Flow::kNormal;
      case StmtKind::kSetBlock: {
        std::string text;
        exec(s.body, text);
        frames_.back()[s.text] = Value(text);
        return Flow::kNormal;
      }
      case StmtKind::kMacro: define_macro(s); return Flow::kNormal;
      case StmtKind::kBreak: return Flow::kBreak;
      case StmtKind::kContinue: return Flow::kContinue;
      case StmtKind::kBlock: return exec(s.body, out);
    }
    return Flow::kNormal;
  }

  void bind_targets(const std::vector<std::string>& targets, const Value& v, Pos pos) {
    if (targets.size() == 1) {
      frames_.back()[targets[0]] = v;
      return;
    }
    std::vector<Value> items;
    try {
      items = iterate(v);
    } catch (const TypeError& e) {
      throw_at(pos, std::string("cannot unpack: ") + e.what());
    }
    if (items.size() != targets.size()) {
      throw_at(pos, "cannot unpack " + std::to_string(items.size()) + " value(s) into " +
                        std::to_string(targets.size()) + " names");
    }
    for (size_t i = 0; i < items.size(); ++i) frames_.back()[targets[i]] = items[i];
  }

  void exec_for(const Stmt& s, std::string& out) {
    const Value seq_v = eval(*s.expr);
    std::vector<Value> items;
    try {
      items = iterate(seq_v);
    } catch (const TypeError& e) {
      throw_at(s.expr->pos, std::string("for loop: ") + e.what());
    }
    frames_.emplace_back();
    if (s.filter) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        bind_targets(s.targets, item, s.pos);
        if (eval(*s.filter).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      frames_.pop_back();
      exec(s.else_body, out);
      return;
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      frames_.back().clear();  // NOTE: jinja2 starts each iteration from the outer values
      bind_targets(s.targets, items[i], s.pos);
      Dict loop;
      loop.set(Value("index"), Value(i + 1));
      loop.set(Value("index0"), Value(i));
      loop.set(Value("revindex"), Value(n - i));
      loop.set(Value("revindex0"), Value(n - i - 1));
      loop.set(Value("first"), Value(i == 0));
      loop.set(Value("last"), Value(i == n - 1));
      loop.set(Value("length"), Value(n));
      loop.set(Value("depth"), Value(int64_t{1}));
      loop.set(Value("depth0"), Value(int64_t{0}));
      if (i > 0) loop.set(Value("previtem"), items[i - 1]);
      if (i + 1 < n) loop.set(Value("nextitem"), items[i + 1]);
      loop.set(Value("cycle"), Value::callable("loop.cycle", [i](CallArgs& a) {
                 if (a.pos.empty()) throw TypeError("loop.cycle() needs at least one argument");
                 return a.pos[static_cast<size_t>(i) % a.pos.size()];
               }));
      frames_.back()["loop"] = Value::dict(std::move(loop));
      if (exec(s.body, out) == Flow::kBreak) break;
    }
    frames_.pop_back();
  }

  void exec_set(const Stmt& s) {
    Value v = eval(*s.expr);
    if (!s.attr_target) {
      bind_targets(s.targets, v, s.pos);
      return;
    }
    const Value ns = lookup(s.targets[0]);
    if (!ns.is_namespace()) {
      throw_at(s.pos, "cannot assign attribute '" + s.targets[1] + "' on '" + s.targets[0] + "' (a " +
                          ns.type_name() + "): only namespace() objects take `set x.attr = ...`");
    }
    ns.as_namespace().attrs.set(Value(s.targets[1]), std::move(v));
  }

  void define_macro(const Stmt& s) {
    const Stmt* m = &s;
    frames_.back()[s.text] = Value::callable(s.text, [this, m](CallArgs& a) { return call_macro(*m, a); });
  }

  Value call_macro(const Stmt& m, CallArgs& a) {
    if (a.pos.size() > m.params.size()) {
      throw TypeError("macro '" + m.text + "' takes not more than " + std::to_string(m.params.size()) +
                      " argument(s), " + std::to_string(a.pos.size()) + " given");
    }
    if (depth_ >= kMaxMacroDepth) throw TypeError("macro recursion deeper than " + std::to_string(kMaxMacroDepth));
    std::vector<Frame> saved = {frames_[0], Frame{}};
    std::swap(saved, frames_);
    ++depth_;
    std::string out;
    try {
      for (size_t i = 0; i < m.params.size(); ++i) {
        const auto& [name, dflt] = m.params[i];
        Value v;
        bool found = i < a.pos.size();
        if (found) v = a.pos[i];
        for (const auto& [k, kv] : a.kw) {
          if (k == name) {
            v = kv;
            found = true;
          }
        }
        if (!found) v = dflt ? eval(*dflt) : Value::undefined(name);
        frames_.back()[name] = v;
      }
      for (const auto& [k, kv] : a.kw) {
        bool known = false;
        for (const auto& p : m.params) known = known || p.first == k;
        if (!known) throw TypeError("macro '" + m.text + "' takes no keyword argument '" + k + "'");
      }
      exec(m.body, out);
    } catch (...) {
      --depth_;
      saved[0] = std::move(frames_[0]);
      frames_ = std::move(saved);
      throw;
    }
    --depth_;
    saved[0] = std::move(frames_[0]);
    frames_ = std::move(saved);
    return Value(out);
  }

  Value lookup(const std::string& name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      const auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    return Value::undefined(name);
  }

  Value eval(const Expr& e) {
    try {
      return eval_inner(e);
    } catch (const TypeError& err) {
      throw_at(e.pos, err.what(), err.hint());
    }
  }

  CallArgs eval_args(const Expr& e, size_t first) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) a.pos.push_back(eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) a.kw.emplace_back(k, eval(*v));
    return a;
  }

  Value eval_inner(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kLiteral: return e.value;
      case ExprKind::kName: return lookup(e.name);
      case ExprKind::kList: {
        std::vector<Value> items;
        for (const auto& a : e.args) items.push_back(eval(*a));
        return Value::list(std::move(items), e.flag);
      }
      case ExprKind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = eval(*e.args[i]);
          if (k.is_list() || k.is_dict() || k.is_undefined()) throw TypeError("unhashable dict key of type " + k.type_name());
          d.set(std::move(k), eval(*e.args[i + 1]));
        }
        return Value::dict(std::move(d));
      }
      case ExprKind::kAttr: return get_attr(eval(*e.args[0]), e.name);
      case ExprKind::kItem: {
        const Value obj = eval(*e.args[0]);
        return get_item(obj, eval(*e.args[1]));
      }
      case ExprKind::kSlice: {
        const Value obj = eval(*e.args[0]);
        const auto part = [&](int i) { return e.args[i] ? eval(*e.args[i]) : Value(None{}); };
        return get_slice(obj, part(1), part(2), part(3));
      }
      case ExprKind::kCall: {
        const Value fn = eval(*e.args[0]);
        CallArgs a = eval_args(e, 1);
        if (fn.is_undefined()) fail_undefined(fn, "called as a function");
        if (!fn.is_callable()) throw TypeError("'" + fn.type_name() + "' object is not callable");
        return fn.as_callable().fn(a);
      }
      case ExprKind::kFilter: {
        const Value v = eval(*e.args[0]);
        CallArgs a = eval_args(e, 1);
        return call_filter(e.name, v, a);
      }
      case ExprKind::kTest: {
        const Value v = eval(*e.args[0]);
        CallArgs a = eval_args(e, 1);
        return Value(call_test(e.name, v, a) != e.flag);
      }
      case ExprKind::kUnary: {
        const Value v = eval(*e.args[0]);
        if (e.name == "not") return Value(!v.truthy());
        if (v.is_undefined()) fail_undefined(v, "operand of unary " + e.name);
        if (!v.is_number()) throw TypeError("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
        if (e.name == "+") return v.is_float() ? v : Value(v.as_int());
        return v.is_float() ? Value(-v.as_double()) : Value(-v.as_int());
      }
      case ExprKind::kBinary: {
        Value l = eval(*e.args[0]);
        if (e.name == "and") return l.truthy() ? eval(*e.args[1]) : l;
        if (e.name == "or") return l.truthy() ? l : eval(*e.args[1]);
        return binary_op(e.name, l, eval(*e.args[1]));
      }
      case ExprKind::kCompare: {
        Value l = eval(*e.args[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value r = eval(*e.args[i + 1]);
          if (!compare_op(e.ops[i], l, r)) return Value(false);
          l = std::move(r);
        }
        return Value(true);
      }
      case ExprKind::kCond:
        if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : Value::undefined("inline if without else");
    }
    return Value();
  }

  std::vector<Frame> frames_;
  int depth_ = 0;
};

}  // namespace

std::string render_body(const Body& body, Dict vars) {
  Renderer r(std::move(vars));
  std::string out;
  r.exec(body, out);
  return out;
}

}  // namespace moerl::jinja
