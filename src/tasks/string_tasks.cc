// Tasks "sort" ("sort 3142:" -> "1234"), "reverse" ("rev abc:" -> "cba") and "copy"
// ("copy abc:" -> "abc"): strings of min_length..max_length symbols drawn with replacement.
#include <algorithm>
#include <string>

#include "base/error.h"
#include "tasks/builtin_tasks.h"
#include "tasks/generated_task.h"

namespace moerl::tasks {

namespace {

enum class Transform { kSort, kReverse, kCopy };

class StringTask : public GeneratedTask {
 public:
  StringTask(std::string name, Transform transform, std::string prefix, std::string alphabet,
             int min_len, int max_len, const TaskCommon& common)
      : GeneratedTask(std::move(name), common),
        transform_(transform),
        prefix_(std::move(prefix)),
        alphabet_(std::move(alphabet)),
        min_len_(min_len),
        max_len_(max_len) {
    check_splits();
  }
  TaskLimits limits() const override {
    return TaskLimits{prefix_.size() + static_cast<size_t>(max_len_) + 1, static_cast<size_t>(max_len_)};
  }

 protected:
  Problem generate(Rng& rng) const override {
    int64_t len = rng.uniform(min_len_, max_len_);
    std::string s;
    for (int64_t i = 0; i < len; ++i) s += alphabet_[rng.below(alphabet_.size())];
    std::string answer = s;
    if (transform_ == Transform::kSort) std::sort(answer.begin(), answer.end());
    if (transform_ == Transform::kReverse) std::reverse(answer.begin(), answer.end());
    return Problem{prefix_ + s + ":", answer};
  }
  // Same length as the reference and only symbols of the alphabet.
  bool well_formed(const TaskItem& item, std::string_view a) const override {
    if (a.size() != item.answer.size()) return false;
    return std::all_of(a.begin(), a.end(), [&](char c) { return alphabet_.find(c) != std::string::npos; });
  }

 private:
  Transform transform_;
  std::string prefix_, alphabet_;
  int min_len_, max_len_;
};

std::unique_ptr<Task> make_string_task(ConfigTable& t, const TaskCommon& common, const std::string& name,
                                       Transform transform, const std::string& prefix,
                                       const std::string& default_alphabet) {
  int min_len = static_cast<int>(t.integer("min_length", 3, {.min = 1, .max = 12}));
  int max_len = static_cast<int>(t.integer("max_length", 6, {.min = 1, .max = 12}));
  if (min_len > max_len) {
    throw Error("config: " + t.path() + ".min_length = " + std::to_string(min_len) +
                    " exceeds max_length = " + std::to_string(max_len),
                "set min_length <= max_length (both in 1..12)");
  }
  std::string alphabet = t.choice("alphabet", default_alphabet, {"digits", "letters"});
  std::string symbols = alphabet == "digits" ? "0123456789" : "abcdefghijklmnopqrstuvwxyz";
  return std::make_unique<StringTask>(name, transform, prefix, symbols, min_len, max_len, common);
}

}  // namespace

std::unique_ptr<Task> make_sort_task(ConfigTable& t, const TaskCommon& common) {
  return make_string_task(t, common, "sort", Transform::kSort, "sort ", "digits");
}

std::unique_ptr<Task> make_reverse_task(ConfigTable& t, const TaskCommon& common) {
  return make_string_task(t, common, "reverse", Transform::kReverse, "rev ", "letters");
}

std::unique_ptr<Task> make_copy_task(ConfigTable& t, const TaskCommon& common) {
  return make_string_task(t, common, "copy", Transform::kCopy, "copy ", "letters");
}

}  // namespace moerl::tasks
