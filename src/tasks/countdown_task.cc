// Task "countdown": "3 5 7 -> 22:" -> an expression over the given numbers (each used at
// most once) with + - * / and parentheses that equals the target, e.g. "3*5+7".
// Problems are built from a random left-to-right chain over all numbers, so one exists.
#include <algorithm>
#include <sstream>

#include "base/check.h"
#include "base/error.h"
#include "tasks/builtin_tasks.h"
#include "tasks/countdown_expr.h"
#include "tasks/generated_task.h"

namespace moerl::tasks {

namespace {

const char kArrow[] = " -> ";

struct Puzzle {
  std::vector<int64_t> numbers;
  int64_t target = 0;
};

// Inverse of the prompt format; the prompt came from this task, so failure is a bug.
Puzzle parse_prompt(const std::string& prompt) {
  size_t arrow = prompt.find(kArrow);
  MOERL_CHECK(arrow != std::string::npos && !prompt.empty() && prompt.back() == ':')
      << "not a countdown prompt: '" << prompt << "'";
  Puzzle p;
  std::istringstream nums(prompt.substr(0, arrow));
  for (int64_t n; nums >> n;) p.numbers.push_back(n);
  p.target = std::stoll(prompt.substr(arrow + sizeof(kArrow) - 1));
  return p;
}

int precedence(char op) { return op == '+' || op == '-' ? 1 : 2; }

class CountdownTask : public GeneratedTask {
 public:
  CountdownTask(int count, int max_number, int max_target, const TaskCommon& common)
      : GeneratedTask("countdown", common), count_(count), max_number_(max_number), max_target_(max_target) {
    check_splits();
  }
  TaskLimits limits() const override {
    size_t num = std::to_string(max_number_).size(), tgt = std::to_string(max_target_).size();
    size_t prompt = count_ * (num + 1) - 1 + (sizeof(kArrow) - 1) + tgt + 1;
    size_t answer = count_ * num + (count_ - 1) + 2 * (count_ - 2);  // numbers, ops, parentheses
    return TaskLimits{prompt, answer};
  }

 protected:
  Problem generate(Rng& rng) const override {
    for (int draw = 0; draw < 10000; ++draw) {  // almost every draw succeeds
      std::vector<int64_t> nums(count_);
      for (auto& n : nums) n = rng.uniform(1, max_number_);
      std::vector<int64_t> order = nums;
      for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
      int64_t value = order[0];
      std::string text = std::to_string(value);
      int text_prec = 3;
      for (size_t i = 1; i < order.size(); ++i) {
        int64_t n = order[i];
        std::string ops = "+*";
        if (value - n >= 0) ops += '-';
        if (value % n == 0) ops += '/';
        char op = ops[rng.below(ops.size())];
        value = op == '+' ? value + n : op == '-' ? value - n : op == '*' ? value * n : value / n;
        if (precedence(op) > text_prec) text = "(" + text + ")";
        text += op + std::to_string(n);
        text_prec = precedence(op);
      }
      if (value < 1 || value > max_target_) continue;
      std::sort(nums.begin(), nums.end());
      std::string prompt;
      for (size_t i = 0; i < nums.size(); ++i) prompt += (i ? " " : "") + std::to_string(nums[i]);
      return Problem{prompt + kArrow + std::to_string(value) + ":", text};
    }
    throw Error("task countdown: no target in [1, " + std::to_string(max_target_) + "] found for " +
                    std::to_string(count_) + " numbers up to " + std::to_string(max_number_),
                "raise max_target or lower max_number");
  }

  bool correct(const TaskItem& item, std::string_view a) const override {
    Puzzle p = parse_prompt(item.prompt);
    auto v = valid(p, a);
    return v && v->value == Fraction{p.target, 1};
  }
  // Parses, evaluates, and uses only the given numbers, each at most once.
  bool well_formed(const TaskItem& item, std::string_view a) const override {
    return valid(parse_prompt(item.prompt), a).has_value();
  }

 private:
  static std::optional<ExprValue> valid(const Puzzle& p, std::string_view a) {
    auto v = evaluate_expression(a);
    if (!v) return std::nullopt;
    std::vector<int64_t> left = p.numbers;
    for (int64_t lit : v->literals) {
      auto it = std::find(left.begin(), left.end(), lit);
      if (it == left.end()) return std::nullopt;
      left.erase(it);
    }
    return v;
  }

  int count_, max_number_, max_target_;
};

}  // namespace

std::unique_ptr<Task> make_countdown_task(ConfigTable& t, const TaskCommon& common) {
  int count = static_cast<int>(t.integer("count", 3, {.min = 2, .max = 4}));
  int max_number = static_cast<int>(t.integer("max_number", 9, {.min = 2, .max = 99}));
  int max_target = static_cast<int>(t.integer("max_target", 100, {.min = 1, .max = 999}));
  return std::make_unique<CountdownTask>(count, max_number, max_target, common);
}

}  // namespace moerl::tasks
