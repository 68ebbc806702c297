// Task "addition": "a+b=" -> decimal sum, a and b uniform in [0, 10^digits). With
// teacher_carry_error = p, the SFT demonstration of a problem is, with probability p, the
// sum a teacher who forgets every carry writes (58+67 -> "15"); rewards always check the
// true sum, so RL can do better than imitation.
#include <string>

#include "tasks/builtin_tasks.h"
#include "tasks/generated_task.h"

namespace moerl::tasks {

namespace {

// Digit-wise sum mod 10: the carry-forgetting teacher's answer (leading zeros dropped).
int64_t sum_without_carries(int64_t a, int64_t b) {
  int64_t out = 0;
  for (int64_t place = 1; a > 0 || b > 0; place *= 10, a /= 10, b /= 10) out += ((a % 10 + b % 10) % 10) * place;
  return out;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

class AdditionTask : public GeneratedTask {
 public:
  AdditionTask(int digits, double teacher_carry_error, const TaskCommon& common)
      : GeneratedTask("addition", common), digits_(digits), teacher_carry_error_(teacher_carry_error) {
    for (int i = 0; i < digits; ++i) limit_ *= 10;
    check_splits();
  }
  TaskLimits limits() const override {
    return TaskLimits{static_cast<size_t>(2 * digits_ + 2), static_cast<size_t>(digits_ + 1)};
  }

 protected:
  Problem generate(Rng& rng) const override {
    int64_t a = rng.uniform(0, limit_ - 1), b = rng.uniform(0, limit_ - 1);
    Problem p{std::to_string(a) + "+" + std::to_string(b) + "=", std::to_string(a + b)};
    if (teacher_carry_error_ > 0 && static_cast<double>(rng.below(1u << 30)) < teacher_carry_error_ * (1u << 30)) {
      p.demonstration = std::to_string(sum_without_carries(a, b));
    }
    return p;
  }
  // A number of at most digits + 1 digits.
  bool well_formed(const TaskItem&, std::string_view a) const override {
    return all_digits(a) && a.size() <= static_cast<size_t>(digits_ + 1);
  }

 private:
  int digits_;
  double teacher_carry_error_;
  int64_t limit_ = 1;
};

}  // namespace

std::unique_ptr<Task> make_addition_task(ConfigTable& t, const TaskCommon& common) {
  int digits = static_cast<int>(t.integer("digits", 2, {.min = 1, .max = 9}));
  double teacher_carry_error = t.number("teacher_carry_error", 0.0, {.min = 0.0, .max = 1.0});
  return std::make_unique<AdditionTask>(digits, teacher_carry_error, common);
}

}  // namespace moerl::tasks
