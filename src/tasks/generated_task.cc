// Seeded, split-aware sampling of generated problems, shared by the built-in tasks.
#include "tasks/generated_task.h"

#include <sstream>

#include "base/error.h"

namespace moerl::tasks {

namespace {
constexpr uint64_t kMaxAttempts = 20000;
}

GeneratedTask::GeneratedTask(std::string name, TaskCommon common)
    : name_(std::move(name)), common_(common) {}

TaskItem GeneratedTask::item(Split split, uint64_t index) const {
  bool want_held_out = split == Split::kHeldOut;
  for (uint64_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
    Rng rng{common_.seed, static_cast<uint64_t>(split), index, attempt};
    Problem p = generate(rng);
    if (is_held_out(p.prompt, common_.held_out_fraction) == want_held_out) {
      return TaskItem{name_ + "/" + split_name(split) + "/" + std::to_string(index),
                      std::move(p.prompt), std::move(p.answer), std::move(p.demonstration)};
    }
  }
  std::ostringstream os;
  os << "task " << name_ << ": no " << split_name(split) << " problem found in " << kMaxAttempts
     << " draws (held_out_fraction = " << common_.held_out_fraction << ")";
  throw Error(os.str(), "the problem space is too small for this split; use a held_out_fraction "
                        "between 0.01 and 0.5, or more digits/longer lists");
}

bool GeneratedTask::correct(const TaskItem& item, std::string_view answer) const {
  return answer == item.answer;
}

double GeneratedTask::reward(const TaskItem& item, std::string_view completion) const {
  std::string_view a = answer_text(completion);
  if (correct(item, a)) return 1.0;
  return well_formed(item, a) ? common_.format_reward : 0.0;
}

void GeneratedTask::check_splits() const {
  item(Split::kTrain, 0);
  item(Split::kHeldOut, 0);
}

}  // namespace moerl::tasks
