// Task "jsonl": prompts and reference answers from a JSON Lines file (one object per line:
// {"prompt": "...", "answer": "..." or a number}; format in docs/formats/tasks_jsonl.md),
// checked by the exact, numeric or math verifier (verifiers.h), optionally behind the
// reasoning-block format check (think_format.h). The held-out split is chosen by a hash of
// each prompt; each split is served in a seeded order that reshuffles every pass.
//
//   JsonlTaskOptions o{.file = "data/gsm8k.jsonl", .verifier = VerifierKind::kMath,
//                      .think = ThinkMode::kRequired};
//   std::unique_ptr<Task> t = load_jsonl_task(o);   // throws moerl::Error naming file:line
// Immutable after loading; thread-safe.
#pragma once

#include <memory>
#include <string>

#include "base/config.h"
#include "tasks/task.h"
#include "tasks/think_format.h"
#include "tasks/verifiers.h"

namespace moerl::tasks {

struct JsonlTaskOptions {
  std::string file;
  VerifierKind verifier = VerifierKind::kExact;
  double tolerance = 1e-6;
  // Applies to every verifier: kRequired/kOptional judge only the text after </think>; a
  // broken block scores 0 (think_format.h).
  ThinkMode think = ThinkMode::kOff;
  TaskCommon common;
};

std::unique_ptr<Task> load_jsonl_task(const JsonlTaskOptions& options);
// Reads file (required), verifier, tolerance, think from [task].
std::unique_ptr<Task> make_jsonl_task(ConfigTable& table, const TaskCommon& common);

}  // namespace moerl::tasks
