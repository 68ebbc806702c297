// The syntax tree the parser builds and the evaluator walks. Plain structs; a tree is
// immutable after parsing and may be rendered from several threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/jinja/error.h"
#include "model/jinja/value.h"

namespace moerl::jinja {

enum class ExprKind {
  kLiteral,  // value
  kName,     // name
  kList,     // args; is_tuple
  kDict,     // args: key, value, key, value, ...
  kAttr,     // args[0].name
  kItem,     // args[0][args[1]]
  kSlice,    // args[0][args[1]:args[2]:args[3]], absent parts null
  kCall,     // args[0](args[1..], kwargs)
  kFilter,   // args[0] | name(args[1..], kwargs)
  kTest,     // args[0] is [not] name(args[1..])
  kUnary,    // name ("not", "-", "+") args[0]
  kBinary,   // args[0] name args[1]; name is the operator ("and", "or", "+", "~", ...)
  kCompare,  // args[0] ops[0] args[1] ops[1] args[2] ... (chained, as in Python)
  kCond,     // args[0] if args[1] else args[2] (args[2] null: undefined)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  Pos pos;
  std::string name;
  Value value;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool flag = false;  // kList: tuple; kTest: negated
};

enum class StmtKind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kBlock };

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  StmtKind kind;
  Pos pos;
  std::string text;                  // kText: the text; kSetBlock/kMacro: the name
  std::vector<std::string> targets;  // kFor/kSet: names (kSet with attr: {namespace, attr})
  bool attr_target = false;          // kSet: `set ns.attr = ...`
  ExprPtr expr;                      // kOutput, kFor (iterable), kSet (value)
  ExprPtr filter;                    // kFor: the `if` clause
  std::vector<std::pair<ExprPtr, Body>> branches;     // kIf: condition, body
  Body body, else_body;                               // kFor, kSetBlock, kMacro, kBlock; kIf/kFor else
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro: name, default (may be null)
};

}  // namespace moerl::jinja
