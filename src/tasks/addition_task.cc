// Task "addition": "a+b=" -> decimal sum, a and b uniform in [0, 10^digits).
#include <string>

#include "tasks/builtin_tasks.h"
#include "tasks/generated_task.h"

namespace moerl::tasks {

namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

class AdditionTask : public GeneratedTask {
 public:
  AdditionTask(int digits, const TaskCommon& common) : GeneratedTask("addition", common), digits_(digits) {
    for (int i = 0; i < digits; ++i) limit_ *= 10;
    check_splits();
  }
  TaskLimits limits() const override {
    return TaskLimits{static_cast<size_t>(2 * digits_ + 2), static_cast<size_t>(digits_ + 1)};
  }

 protected:
  Problem generate(Rng& rng) const override {
    int64_t a = rng.uniform(0, limit_ - 1), b = rng.uniform(0, limit_ - 1);
    return Problem{std::to_string(a) + "+" + std::to_string(b) + "=", std::to_string(a + b)};
  }
  // A number of at most digits + 1 digits.
  bool well_formed(const TaskItem&, std::string_view a) const override {
    return all_digits(a) && a.size() <= static_cast<size_t>(digits_ + 1);
  }

 private:
  int digits_;
  int64_t limit_ = 1;
};

}  // namespace

std::unique_ptr<Task> make_addition_task(ConfigTable& t, const TaskCommon& common) {
  int digits = static_cast<int>(t.integer("digits", 2, {.min = 1, .max = 9}));
  return std::make_unique<AdditionTask>(digits, common);
}

}  // namespace moerl::tasks
