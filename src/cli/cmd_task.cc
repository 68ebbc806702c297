// `moerl task`: preview or export a task's items (one JSON object per line, the JSONL task
// format) and score a completion with its verifier; loading a JSONL task validates the file.
// When the config's [model] init is a model directory whose tokenizer has a chat template,
// chat-form prompts are shown rendered, exactly as training feeds them to the policy.
//
//   moerl task job.toml --split heldout --count 5
//   moerl task --set task.name=countdown --count 3 --score "3*5+7"
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "base/config.h"
#include "base/error.h"
#include "cli/command.h"
#include "job/chat_prompts.h"
#include "model/tokenizer.h"
#include "tasks/registry.h"

namespace moerl::cli {

static int run_task(Args& args) {
  std::vector<std::string> sets = args.values("--set");
  std::string split_name = args.value_or("--split", "train");
  int64_t count = args.integer("--count", 5);
  int64_t first = args.integer("--first", 0);
  std::optional<std::string> score = args.value("--score");
  std::optional<std::string> file = args.optional_positional(0);
  args.finish();
  if (split_name != "train" && split_name != "heldout") {
    throw Error("--split " + split_name + " is not a split", "use --split train or --split heldout");
  }
  if (count < 0 || first < 0) {
    throw Error("--count and --first must be >= 0", "e.g. --first 0 --count 10");
  }
  ConfigDoc doc = file ? ConfigDoc::load(*file, sets) : ConfigDoc::parse("", "(command line)", sets);
  ConfigTable t = doc.root().table("task");
  const job::ChatSection chat = job::read_chat_section(t);
  std::shared_ptr<const tasks::Task> task = tasks::make_task(t);
  t.string("reward", "verifier");  // owned by the trainer; not used here
  t.done();
  const std::string init = doc.root().table("model").string("init", "random");
  std::unique_ptr<model::Tokenizer> tok;
  if (init != "random") {
    tok = model::load_tokenizer(init);
    task = job::task_for_tokenizer(task, chat, *tok, "the tokenizer in " + init);
  }

  tasks::Split split = split_name == "train" ? tasks::Split::kTrain : tasks::Split::kHeldOut;
  tasks::TaskLimits lim = task->limits();
  std::optional<uint64_t> size = task->size(split);
  std::fprintf(stderr, "task %s: %s split, %s items; prompts <= %zu chars, answers <= %zu chars\n",
               task->name().c_str(), split_name.c_str(),
               size ? std::to_string(*size).c_str() : "unbounded", lim.max_prompt_chars,
               lim.max_answer_chars);
  for (int64_t i = 0; i < count; ++i) {
    tasks::TaskItem it = task->item(split, static_cast<uint64_t>(first + i));
    nlohmann::ordered_json line = {{"id", it.id}, {"prompt", it.prompt}, {"answer", it.answer}};
    if (!it.demonstration.empty()) line["demonstration"] = it.demonstration;
    if (!tok && task->needs_chat_template()) line["messages"] = nlohmann::ordered_json::parse(it.chat);
    if (score) line["reward"] = task->reward(it, *score);
    std::cout << line.dump() << "\n";
  }
  return 0;
}

MOERL_COMMAND("task", "print a task's items as JSONL (--split, --count, --first) and score --score TEXT",
              run_task);

}  // namespace moerl::cli
