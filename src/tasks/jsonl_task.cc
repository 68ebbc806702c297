// JSONL dataset task: strict line-by-line loading with file:line errors, hash split,
// seeded per-pass order.
#include "tasks/jsonl_task.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tasks/math_extract.h"
#include "tasks/math_normalize.h"

namespace moerl::tasks {

namespace {

const char kLineHint[] =
    "each line must be one JSON object such as {\"prompt\": \"12+34=\", \"answer\": \"46\"} "
    "(see docs/formats/tasks_jsonl.md)";

class JsonlTask : public Task {
 public:
  JsonlTask(JsonlTaskOptions o, std::vector<TaskItem> train, std::vector<TaskItem> held_out, bool has_messages)
      : o_(std::move(o)), train_(std::move(train)), held_out_(std::move(held_out)), has_messages_(has_messages) {
    for (const auto* v : {&train_, &held_out_}) {
      for (const auto& it : *v) {
        limits_.max_prompt_chars = std::max(limits_.max_prompt_chars, it.prompt.size());
        limits_.max_answer_chars = std::max(limits_.max_answer_chars, it.answer.size());
      }
    }
  }
  std::string name() const override { return "jsonl"; }
  std::optional<uint64_t> size(Split split) const override { return items_of(split).size(); }
  TaskLimits limits() const override { return limits_; }
  bool needs_chat_template() const override { return has_messages_; }

  TaskItem item(Split split, uint64_t index) const override {
    const std::vector<TaskItem>& v = items_of(split);
    if (v.empty()) {
      std::ostringstream os;
      os << "task jsonl: " << o_.file << " has no " << split_name(split) << " lines (held_out_fraction = "
         << o_.common.held_out_fraction << ", " << train_.size() + held_out_.size() << " lines)";
      throw Error(os.str(), "use held_out_fraction between 0.01 and 0.5 and a file with enough lines");
    }
    uint64_t n = v.size(), pass = index / n;
    uint64_t key = Rng{o_.common.seed, static_cast<uint64_t>(split), pass}.next();
    return v[permute_index(index % n, n, key)];
  }

  double reward(const TaskItem& item, std::string_view completion) const override {
    std::optional<std::string_view> judged = judged_text(item.prompt, completion, o_.think);
    if (!judged) return 0.0;  // NOTE: a broken reasoning block is not "well-formed": no format_reward
    return verify(o_.verifier, *judged, item.answer,
                  VerifierOptions{.tolerance = o_.tolerance, .format_reward = o_.common.format_reward});
  }

 private:
  const std::vector<TaskItem>& items_of(Split split) const {
    return split == Split::kTrain ? train_ : held_out_;
  }

  JsonlTaskOptions o_;
  std::vector<TaskItem> train_, held_out_;
  TaskLimits limits_;
  bool has_messages_;  // some line is a "messages" conversation
};

[[noreturn]] void line_error(const std::string& file, size_t line, const std::string& what,
                             const char* hint = kLineHint) {
  throw Error("task jsonl: " + file + ":" + std::to_string(line) + ": " + what, hint);
}

// A "messages" value: a non-empty array of {"role", "content"} string pairs ending with the
// user turn the policy answers; returned as compact JSON (TaskItem::chat).
std::string conversation(const std::string& file, size_t line_no, const nlohmann::json& m) {
  const char* hint = "write \"messages\": [{\"role\": \"system\", \"content\": ...}, {\"role\": \"user\", "
                     "\"content\": ...}] ending with the user turn to answer (docs/formats/tasks_jsonl.md)";
  if (!m.is_array() || m.empty()) line_error(file, line_no, "\"messages\" must be a non-empty array", hint);
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string at = "\"messages\"[" + std::to_string(i) + "]";
    const nlohmann::json& e = m[i];
    if (!e.is_object()) line_error(file, line_no, at + " must be an object, found " + std::string(e.type_name()), hint);
    auto role = e.find("role"), content = e.find("content");
    if (role == e.end() || !role->is_string()) line_error(file, line_no, at + " needs a string \"role\"", hint);
    if (content == e.end() || !content->is_string()) line_error(file, line_no, at + " needs a string \"content\"", hint);
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant") {
      line_error(file, line_no, at + " has role \"" + r + "\"", "roles are \"system\", \"user\" and \"assistant\"");
    }
    out.push_back({{"role", r}, {"content", content->get<std::string>()}});
  }
  if (out.back()["role"] != "user" || out.back()["content"].get<std::string>().empty()) {
    line_error(file, line_no, "the last message must be a non-empty user turn (the one the policy answers)", hint);
  }
  return out.dump();
}

// One line as a task item; `conversation_line` is set when it was a "messages" line.
TaskItem parse_line(const std::string& file, size_t line_no, const std::string& line,
                    VerifierKind verifier, bool& conversation_line) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    size_t colon = what.find("] ");  // drop nlohmann's "[json.exception.parse_error.101] " tag
    line_error(file, line_no, "not valid JSON: " + (colon == std::string::npos ? what : what.substr(colon + 2)));
  }
  if (!j.is_object()) line_error(file, line_no, "expected a JSON object, found " + std::string(j.type_name()));
  TaskItem it;
  auto prompt = j.find("prompt");
  auto messages = j.find("messages");
  if (prompt != j.end() && messages != j.end()) {
    line_error(file, line_no, "has both \"prompt\" and \"messages\"", "give one: a plain prompt or a conversation");
  }
  if (messages != j.end()) {
    it.chat = conversation(file, line_no, *messages);
    conversation_line = true;
    it.prompt = messages->back().at("content").get<std::string>();
  } else {
    if (prompt == j.end()) line_error(file, line_no, "missing key \"prompt\" (or \"messages\")");
    if (!prompt->is_string()) line_error(file, line_no, "\"prompt\" must be a string, found " + std::string(prompt->type_name()));
    it.prompt = prompt->get<std::string>();
    if (it.prompt.empty()) line_error(file, line_no, "\"prompt\" is empty");
    // Rendered as one user turn when the chat template is on (tasks/chat_task.h).
    it.chat = nlohmann::ordered_json::array({{{"role", "user"}, {"content", it.prompt}}}).dump();
  }
  auto answer = j.find("answer");
  if (answer == j.end()) line_error(file, line_no, "missing key \"answer\"");
  if (answer->is_string()) {
    it.answer = answer->get<std::string>();
  } else if (answer->is_number()) {
    it.answer = answer->dump();
  } else {
    line_error(file, line_no, "\"answer\" must be a string or a number, found " + std::string(answer->type_name()));
  }
  if (verifier == VerifierKind::kNumeric && !parse_number(it.answer)) {
    line_error(file, line_no, "\"answer\" = \"" + it.answer + "\" is not a number (verifier = \"numeric\")");
  }
  if (verifier == VerifierKind::kMath) {
    std::optional<std::string> ref = math_reference_answer(it.answer);
    if (!ref || normalize_math_answer(*ref).empty()) {
      line_error(file, line_no, "\"answer\" = \"" + it.answer.substr(0, 200) +
                                    "\" yields no final answer after extraction and normalisation (verifier = \"math\")",
                 "write the final answer itself (\"72\", \"\\\\frac{1}{2}\"), or a solution ending in "
                 "\"#### 72\" or holding a closed \\\\boxed{...} (docs/formats/tasks_jsonl.md)");
    }
  }
  auto id = j.find("id");
  if (id != j.end()) {
    if (!id->is_string()) line_error(file, line_no, "\"id\" must be a string, found " + std::string(id->type_name()));
    it.id = id->get<std::string>();
  } else {
    it.id = file + ":" + std::to_string(line_no);
  }
  return it;
}

}  // namespace

std::unique_ptr<Task> load_jsonl_task(const JsonlTaskOptions& o) {
  std::ifstream in(o.file);
  if (!in) {
    throw Error("task jsonl: cannot read '" + o.file + "'",
                "check [task] file; relative paths are taken from the working directory",
                ErrorCode::kNotFound);
  }
  std::vector<TaskItem> train, held_out;
  bool has_messages = false;
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines are allowed
    TaskItem it = parse_line(o.file, line_no, line, o.verifier, has_messages);
    (is_held_out(it.prompt, o.common.held_out_fraction) ? held_out : train).push_back(std::move(it));
  }
  if (in.bad()) throw Error("task jsonl: read error in '" + o.file + "'", "check the disk", ErrorCode::kIo);
  if (train.empty()) {
    throw Error("task jsonl: " + o.file + " has no training lines (" + std::to_string(held_out.size()) +
                    " held-out, " + std::to_string(line_no) + " lines read)",
                std::string(kLineHint) + "; a file needs several lines");
  }
  if (o.common.held_out_fraction > 0 && held_out.empty()) {
    std::ostringstream os;
    os << "task jsonl: " << o.file << " has no held-out lines: none of its " << train.size()
       << " prompts falls in held_out_fraction = " << o.common.held_out_fraction;
    throw Error(os.str(), "add more lines, raise held_out_fraction, or set held_out_fraction = 0 "
                          "to train without evaluation");
  }
  return std::make_unique<JsonlTask>(o, std::move(train), std::move(held_out), has_messages);
}

std::unique_ptr<Task> make_jsonl_task(ConfigTable& t, const TaskCommon& common) {
  JsonlTaskOptions o;
  o.file = t.required_string("file");
  std::string verifier = t.choice("verifier", "exact", {"exact", "numeric", "math"});
  o.verifier = verifier == "math" ? VerifierKind::kMath
               : verifier == "numeric" ? VerifierKind::kNumeric
                                       : VerifierKind::kExact;
  o.tolerance = t.number("tolerance", o.tolerance, {.min = 0, .max = 1e6});
  std::string think = t.choice("think", "off", {"off", "optional", "required"});
  o.think = think == "required" ? ThinkMode::kRequired : think == "optional" ? ThinkMode::kOptional : ThinkMode::kOff;
  o.common = common;
  return load_jsonl_task(o);
}

}  // namespace moerl::tasks
