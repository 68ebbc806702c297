// Built-in tasks: prompt determinism, held-out disjointness, limits, and verifiers on right,
// wrong and malformed answers.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "base/config.h"
#include "base/error.h"
#include "tasks/countdown_expr.h"
#include "tasks/registry.h"

namespace moerl::tasks {
namespace {

std::unique_ptr<Task> build(const std::string& toml) {
  ConfigDoc doc = ConfigDoc::parse(toml, "job.toml");
  ConfigTable t = doc.root().table("task");
  std::unique_ptr<Task> task = make_task(t);
  t.done();
  return task;
}

const std::vector<std::string> kNames = {"addition", "sort", "reverse", "copy", "countdown"};

TEST(BuiltinTasks, DeterministicFromSeedAndIndex) {
  for (const auto& name : kNames) {
    auto a = build("[task]\nname = \"" + name + "\"\nseed = 5\n");
    auto b = build("[task]\nname = \"" + name + "\"\nseed = 5\n");
    auto c = build("[task]\nname = \"" + name + "\"\nseed = 6\n");
    int differ = 0;
    for (uint64_t i = 0; i < 50; ++i) {
      for (Split s : {Split::kTrain, Split::kHeldOut}) {
        TaskItem x = a->item(s, i), y = b->item(s, i);
        EXPECT_EQ(x.prompt, y.prompt);
        EXPECT_EQ(x.answer, y.answer);
        EXPECT_EQ(x.id, y.id);
        differ += c->item(s, i).prompt != x.prompt;
      }
    }
    EXPECT_GT(differ, 40) << name;
    EXPECT_EQ(a->item(Split::kTrain, 3).id, name + "/train/3");
  }
}

TEST(BuiltinTasks, HeldOutDisjointFromTrainAndWithinLimits) {
  for (const auto& name : kNames) {
    auto task = build("[task]\nname = \"" + name + "\"\nseed = 1\n");
    TaskLimits lim = task->limits();
    EXPECT_LE(lim.max_prompt_chars, 24u) << name;
    EXPECT_LE(lim.max_answer_chars, 12u) << name;
    std::set<std::string> train;
    for (const TaskItem& it : task->items(Split::kTrain, 0, 3000)) {
      train.insert(it.prompt);
      EXPECT_LE(it.prompt.size(), lim.max_prompt_chars) << it.prompt;
      EXPECT_LE(it.answer.size(), lim.max_answer_chars) << it.answer;
      EXPECT_EQ(task->reward(it, it.answer), 1.0) << name << " " << it.prompt << " " << it.answer;
    }
    std::set<std::string> held;
    for (const TaskItem& it : task->items(Split::kHeldOut, 0, 300)) {
      EXPECT_EQ(train.count(it.prompt), 0u) << name << " leaks " << it.prompt;
      EXPECT_EQ(task->reward(it, it.answer + "\n"), 1.0) << name << " " << it.prompt;
      held.insert(it.prompt);
    }
    EXPECT_GT(held.size(), 100u) << name;  // enough distinct held-out problems for evaluation
    EXPECT_GT(train.size(), 1000u) << name;
  }
}

// The carry-forgetting teacher: the same prompts and rewards, the demonstration of a chosen
// share of problems summed digit by digit mod 10 (and rewarded as wrong when that differs).
TEST(Addition, TeacherCarryErrorChangesOnlyTheDemonstrations) {
  auto exact = build("[task]\nname = \"addition\"\ndigits = 2\n");
  auto always = build("[task]\nname = \"addition\"\ndigits = 2\nteacher_carry_error = 1.0\n");
  auto half = build("[task]\nname = \"addition\"\ndigits = 2\nteacher_carry_error = 0.5\n");
  int carries = 0, half_wrong = 0;
  for (uint64_t i = 0; i < 2000; ++i) {
    const TaskItem e = exact->item(Split::kTrain, i), a = always->item(Split::kTrain, i), h = half->item(Split::kTrain, i);
    ASSERT_EQ(e.prompt, a.prompt);
    ASSERT_EQ(e.prompt, h.prompt);
    ASSERT_EQ(e.answer, a.answer);
    EXPECT_EQ(e.demonstration, "");
    EXPECT_EQ(e.sft_target(), e.answer);
    const size_t plus = e.prompt.find('+');
    const int x = std::stoi(e.prompt.substr(0, plus)), y = std::stoi(e.prompt.substr(plus + 1));
    const int no_carry = (x % 10 + y % 10) % 10 + 10 * ((x / 10 + y / 10) % 10);
    ASSERT_EQ(a.sft_target(), std::to_string(no_carry)) << e.prompt;
    const bool carry = no_carry != x + y;
    carries += carry;
    EXPECT_EQ(always->reward(a, a.sft_target()), carry ? 0.0 : 1.0) << e.prompt;
    ASSERT_TRUE(h.sft_target() == e.answer || h.sft_target() == a.sft_target()) << e.prompt;
    half_wrong += h.sft_target() != e.answer;
  }
  EXPECT_EQ(always->item(Split::kTrain, 0).id, exact->item(Split::kTrain, 0).id);
  // 1 - 0.55^2 ~ 70% of 2-digit problems carry somewhere; half of those are taught wrong.
  EXPECT_NEAR(carries, 1395, 100);
  EXPECT_NEAR(half_wrong, carries / 2, carries / 10);
}

TEST(Addition, PromptsAndVerifier) {
  auto task = build("[task]\nname = \"addition\"\ndigits = 2\nformat_reward = 0.1\n");
  for (const TaskItem& it : task->items(Split::kTrain, 0, 200)) {
    size_t plus = it.prompt.find('+');
    ASSERT_NE(plus, std::string::npos);
    ASSERT_EQ(it.prompt.back(), '=');
    int a = std::stoi(it.prompt.substr(0, plus)), b = std::stoi(it.prompt.substr(plus + 1));
    EXPECT_LT(a, 100);
    EXPECT_LT(b, 100);
    EXPECT_EQ(it.answer, std::to_string(a + b));
  }
  TaskItem it{"x", "12+34=", "46"};
  EXPECT_EQ(task->reward(it, "46"), 1.0);
  EXPECT_EQ(task->reward(it, " 46 \nnoise"), 1.0);
  EXPECT_EQ(task->reward(it, "47"), 0.1);    // well-formed, wrong
  EXPECT_EQ(task->reward(it, "046"), 0.1);   // a number, not the canonical answer
  EXPECT_EQ(task->reward(it, "4x"), 0.0);    // malformed
  EXPECT_EQ(task->reward(it, ""), 0.0);
  EXPECT_EQ(task->reward(it, "4600"), 0.0);  // longer than digits + 1
  EXPECT_EQ(task->reward(it, "-46"), 0.0);
}

TEST(Sort, Verifier) {
  auto task = build("[task]\nname = \"sort\"\nformat_reward = 0.1\n");
  for (const TaskItem& it : task->items(Split::kTrain, 0, 100)) {
    std::string body = it.prompt.substr(5, it.prompt.size() - 6);
    std::sort(body.begin(), body.end());
    EXPECT_EQ(it.answer, body);
    EXPECT_EQ(it.prompt.substr(0, 5), "sort ");
  }
  TaskItem it{"x", "sort 3142:", "1234"};
  EXPECT_EQ(task->reward(it, "1234"), 1.0);
  EXPECT_EQ(task->reward(it, "1243"), 0.1);
  EXPECT_EQ(task->reward(it, "123"), 0.0);
  EXPECT_EQ(task->reward(it, "12a4"), 0.0);
  auto letters = build("[task]\nname = \"sort\"\nalphabet = \"letters\"\nmin_length = 2\nmax_length = 3\n");
  for (const TaskItem& t : letters->items(Split::kTrain, 0, 50)) {
    EXPECT_GE(t.answer.size(), 2u);
    EXPECT_LE(t.answer.size(), 3u);
    EXPECT_TRUE(std::is_sorted(t.answer.begin(), t.answer.end()));
    EXPECT_TRUE(std::all_of(t.answer.begin(), t.answer.end(), [](char c) { return c >= 'a' && c <= 'z'; }));
  }
}

TEST(ReverseAndCopy, Verifier) {
  auto rev = build("[task]\nname = \"reverse\"\nformat_reward = 0.1\n");
  TaskItem it{"x", "rev abc:", "cba"};
  EXPECT_EQ(rev->reward(it, "cba"), 1.0);
  EXPECT_EQ(rev->reward(it, "abc"), 0.1);
  EXPECT_EQ(rev->reward(it, "cb"), 0.0);
  EXPECT_EQ(rev->reward(it, "cb1"), 0.0);
  TaskItem r0 = rev->item(Split::kTrain, 0);
  std::string body = r0.prompt.substr(4, r0.prompt.size() - 5);
  EXPECT_EQ(r0.answer, std::string(body.rbegin(), body.rend()));
  auto copy = build("[task]\nname = \"copy\"\n");
  TaskItem c0 = copy->item(Split::kTrain, 0);
  EXPECT_EQ(c0.prompt, "copy " + c0.answer + ":");
  EXPECT_EQ(copy->reward(c0, c0.answer + "x"), 0.0);
}

TEST(Countdown, Verifier) {
  auto task = build("[task]\nname = \"countdown\"\nformat_reward = 0.1\n");
  TaskItem it{"x", "3 5 7 -> 22:", "3*5+7"};
  EXPECT_EQ(task->reward(it, "3*5+7"), 1.0);
  EXPECT_EQ(task->reward(it, "7+5*3"), 1.0);      // any valid expression counts
  EXPECT_EQ(task->reward(it, " 5 * 3 + 7 "), 1.0);
  EXPECT_EQ(task->reward(it, "(7+5)*3"), 0.1);    // 36: well-formed, misses
  EXPECT_EQ(task->reward(it, "3+5"), 0.1);        // a subset is allowed, misses
  EXPECT_EQ(task->reward(it, "3*5+7+7"), 0.0);    // 7 used twice
  EXPECT_EQ(task->reward(it, "22"), 0.0);         // 22 is not a given number
  EXPECT_EQ(task->reward(it, "3*5+"), 0.0);       // malformed
  EXPECT_EQ(task->reward(it, "3*(5+7"), 0.0);
  EXPECT_EQ(task->reward(it, "7/(5-5)"), 0.0);    // uses 5 twice anyway, and divides by zero
  EXPECT_EQ(task->reward(it, "-3+25"), 0.0);      // no unary minus
  TaskItem frac{"y", "2 3 9 -> 6:", "9/3*2"};
  EXPECT_EQ(task->reward(frac, "9*2/3"), 1.0);
  EXPECT_EQ(task->reward(frac, "2/3*9"), 1.0);    // exact rationals: 2/3 * 9 = 6
  for (const TaskItem& g : task->items(Split::kHeldOut, 0, 200)) {
    ASSERT_EQ(g.prompt.back(), ':');
    auto v = evaluate_expression(g.answer);
    ASSERT_TRUE(v.has_value()) << g.answer;
    EXPECT_EQ(v->value.den, 1);
    EXPECT_EQ(std::to_string(v->value.num), g.prompt.substr(g.prompt.find("-> ") + 3,
                                                             g.prompt.size() - g.prompt.find("-> ") - 4));
  }
}

TEST(CountdownExpr, EvaluatesAndRejects) {
  auto v = evaluate_expression("(3+5)*7");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->value, (Fraction{56, 1}));
  EXPECT_EQ(v->literals, (std::vector<int64_t>{3, 5, 7}));
  EXPECT_EQ(evaluate_expression("7/2")->value, (Fraction{7, 2}));
  EXPECT_EQ(evaluate_expression("1-2-3")->value, (Fraction{-4, 1}));   // left-associative
  EXPECT_EQ(evaluate_expression("8/4/2")->value, (Fraction{1, 1}));
  EXPECT_EQ(evaluate_expression("2+3*4")->value, (Fraction{14, 1}));   // precedence
  std::string why;
  EXPECT_FALSE(evaluate_expression("2*(3", &why));
  EXPECT_NE(why.find("missing ')'"), std::string::npos) << why;
  EXPECT_FALSE(evaluate_expression("", &why));
  EXPECT_FALSE(evaluate_expression("1/(2-2)", &why));
  EXPECT_NE(why.find("division by zero"), std::string::npos) << why;
  EXPECT_FALSE(evaluate_expression(std::string(17, '(') + "1" + std::string(17, ')'), &why));
  EXPECT_FALSE(evaluate_expression(std::string(65, '1'), &why));
  EXPECT_FALSE(evaluate_expression("1234567", &why));
  EXPECT_FALSE(evaluate_expression("999999*999999*999999", &why));   // bounded magnitude
  EXPECT_FALSE(evaluate_expression("1 2", &why));
}

TEST(BuiltinTasks, BadConfigNamesTheKey) {
  auto message = [](const std::string& toml) -> std::string {
    try {
      build(toml);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message("[task]\nname = \"addition\"\ndigits = 20\n").find("task.digits"), std::string::npos);
  EXPECT_NE(message("[task]\nname = \"sort\"\nmin_length = 5\nmax_length = 3\n").find("task.min_length"),
            std::string::npos);
  EXPECT_NE(message("[task]\nname = \"addition\"\ndigts = 2\n").find("digts"), std::string::npos);
  std::string e = message("[task]\nname = \"chess\"\n");
  EXPECT_NE(e.find("task.name = \"chess\""), std::string::npos) << e;
  EXPECT_NE(e.find("countdown"), std::string::npos) << e;
  EXPECT_NE(message("[task]\nseed = 1\n").find("task.name"), std::string::npos);
  EXPECT_NE(message("[task]\nname = \"countdown\"\ncount = 9\n").find("task.count"), std::string::npos);
}

}  // namespace
}  // namespace moerl::tasks
