// JSONL task: loading, split, seeded order, exact/numeric/math verifiers, the think option,
// and errors that name the file, the line and what is wrong.
#include "tasks/jsonl_task.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/files.h"
#include "tasks/registry.h"

namespace moerl::tasks {
namespace {

class JsonlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("moerl_tasks_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { remove_tree(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::string numbers_file(int n) {
    std::string text;
    for (int i = 0; i < n; ++i) {
      text += "{\"prompt\": \"" + std::to_string(i) + "*2=\", \"answer\": \"" + std::to_string(2 * i) + "\"}\n";
    }
    return write("nums.jsonl", text);
  }
  std::string load_error(const std::string& text, VerifierKind v = VerifierKind::kExact) {
    try {
      load_jsonl_task({.file = write("bad.jsonl", text), .verifier = v});
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("HINT:"), std::string::npos) << e.what();
      return e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
};

TEST_F(JsonlTest, SplitsAreDisjointAndEachPassIsAPermutation) {
  auto task = load_jsonl_task({.file = numbers_file(200), .common = {.seed = 3, .held_out_fraction = 0.2}});
  uint64_t n_train = *task->size(Split::kTrain), n_held = *task->size(Split::kHeldOut);
  EXPECT_EQ(n_train + n_held, 200u);
  EXPECT_GT(n_held, 20u);
  EXPECT_LT(n_held, 70u);
  std::set<std::string> train, held;
  for (uint64_t i = 0; i < n_train; ++i) train.insert(task->item(Split::kTrain, i).prompt);
  for (uint64_t i = 0; i < n_held; ++i) held.insert(task->item(Split::kHeldOut, i).prompt);
  EXPECT_EQ(train.size(), n_train);  // one pass visits every item once
  EXPECT_EQ(held.size(), n_held);
  for (const auto& p : held) EXPECT_EQ(train.count(p), 0u) << p;
  // The second pass is another order of the same items; the same seed repeats it.
  int moved = 0;
  for (uint64_t i = 0; i < n_train; ++i) moved += task->item(Split::kTrain, i).id != task->item(Split::kTrain, i + n_train).id;
  EXPECT_GT(moved, static_cast<int>(n_train / 2));
  auto again = load_jsonl_task({.file = numbers_file(200), .common = {.seed = 3, .held_out_fraction = 0.2}});
  EXPECT_EQ(again->item(Split::kTrain, 77).id, task->item(Split::kTrain, 77).id);
  TaskItem it = task->item(Split::kTrain, 0);
  EXPECT_NE(it.id.find("nums.jsonl:"), std::string::npos) << it.id;
  EXPECT_EQ(task->reward(it, it.answer), 1.0);
}

TEST_F(JsonlTest, ExactAndNumericVerifiers) {
  std::string f = write("qa.jsonl",
                        "{\"prompt\": \"capital of France?\", \"answer\": \"Paris\", \"id\": \"q1\"}\n"
                        "\n"
                        "{\"prompt\": \"half of 1?\", \"answer\": 0.5, \"source\": \"ignored\"}\r\n"
                        "{\"prompt\": \"2+2=\", \"answer\": \"4\"}\n");
  auto exact = load_jsonl_task({.file = f, .common = {.held_out_fraction = 0}});
  EXPECT_EQ(*exact->size(Split::kTrain), 3u);
  EXPECT_THROW(exact->item(Split::kHeldOut, 0), Error);
  TaskItem paris{"q1", "capital of France?", "Paris"};
  EXPECT_EQ(exact->reward(paris, "Paris"), 1.0);
  EXPECT_EQ(exact->reward(paris, " Paris\nbecause"), 1.0);
  EXPECT_EQ(exact->reward(paris, "paris"), 0.0);
  std::set<std::string> ids;
  for (uint64_t i = 0; i < 3; ++i) ids.insert(exact->item(Split::kTrain, i).id);
  EXPECT_EQ(ids.count("q1"), 1u);
  EXPECT_EQ(ids.count(f + ":3"), 1u);  // line numbers count blank lines

  std::string nf = write("num.jsonl", "{\"prompt\": \"half of 1?\", \"answer\": 0.5}\n{\"prompt\": \"x\", \"answer\": \"-2e3\"}\n");
  auto num = load_jsonl_task({.file = nf, .verifier = VerifierKind::kNumeric, .tolerance = 1e-6,
                              .common = {.held_out_fraction = 0, .format_reward = 0.1}});
  TaskItem half{"h", "half of 1?", "0.5"};
  EXPECT_EQ(num->reward(half, "0.5"), 1.0);
  EXPECT_EQ(num->reward(half, ".5000000001"), 1.0);
  EXPECT_EQ(num->reward(half, "0.6"), 0.1);
  EXPECT_EQ(num->reward(half, "0.5 apples"), 0.0);
  EXPECT_EQ(num->reward(half, "nan"), 0.0);
  TaskItem big{"b", "x", "-2e3"};
  EXPECT_EQ(num->reward(big, "-2000.001"), 1.0);  // tolerance is relative for |ref| > 1
  EXPECT_EQ(num->reward(big, "-2001"), 0.1);
}

TEST_F(JsonlTest, MalformedLinesNameFileLineAndProblem) {
  const std::string ok = "{\"prompt\": \"a\", \"answer\": \"b\"}\n";
  struct Case {
    std::string line, want;
  };
  std::vector<Case> cases = {
      {"{\"prompt\": \"a\", \"answer\": \"b\"", "not valid JSON"},
      {"[1, 2]", "expected a JSON object, found array"},
      {"{\"answer\": \"b\"}", "missing key \"prompt\""},
      {"{\"prompt\": \"a\"}", "missing key \"answer\""},
      {"{\"prompt\": 5, \"answer\": \"b\"}", "\"prompt\" must be a string"},
      {"{\"prompt\": \"\", \"answer\": \"b\"}", "\"prompt\" is empty"},
      {"{\"prompt\": \"a\", \"answer\": [1]}", "\"answer\" must be a string or a number"},
      {"{\"prompt\": \"a\", \"answer\": \"b\", \"id\": 3}", "\"id\" must be a string"},
  };
  for (const Case& c : cases) {
    std::string e = load_error(ok + "\n" + c.line + "\n" + ok);
    EXPECT_NE(e.find("bad.jsonl:3: "), std::string::npos) << e;
    EXPECT_NE(e.find(c.want), std::string::npos) << e;
  }
  std::string e = load_error("{\"prompt\": \"a\", \"answer\": 4}\n{\"prompt\": \"b\", \"answer\": \"forty\"}\n",
                             VerifierKind::kNumeric);
  EXPECT_NE(e.find("bad.jsonl:2: \"answer\" = \"forty\" is not a number"), std::string::npos) << e;
  e = load_error("\n\n");
  EXPECT_NE(e.find("has no training lines"), std::string::npos) << e;
}

// "messages" lines keep their conversation (TaskItem::chat, for the chat template); plain
// prompts become one user turn; a file with conversations needs a template.
TEST_F(JsonlTest, ConversationLinesKeepTheirMessages) {
  std::string text;
  for (int i = 0; i < 12; ++i) {
    text += R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is )" +
            std::to_string(i) + R"( + 1?"}], "answer": )" + std::to_string(i + 1) + "}\n";
  }
  auto t = load_jsonl_task({.file = write("chat.jsonl", text), .verifier = VerifierKind::kMath,
                            .common = {.held_out_fraction = 0.0}});
  EXPECT_TRUE(t->needs_chat_template());
  TaskItem it = t->item(Split::kTrain, 0);
  const nlohmann::json m = nlohmann::json::parse(it.chat);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[1]["content"], it.prompt);  // the plain prompt is the user turn
  EXPECT_EQ(t->reward(it, "So \\boxed{" + it.answer + "}"), 1.0);

  auto plain = load_jsonl_task({.file = numbers_file(20), .common = {.held_out_fraction = 0.0}});
  EXPECT_FALSE(plain->needs_chat_template());
  TaskItem p = plain->item(Split::kTrain, 3);
  EXPECT_EQ(nlohmann::json::parse(p.chat), nlohmann::json::parse(R"([{"role": "user", "content": ")" + p.prompt + R"("}])"));

  const std::string ok = "{\"prompt\": \"a\", \"answer\": \"b\"}\n";
  struct Case {
    std::string line, want;
  };
  std::vector<Case> cases = {
      {R"({"messages": [], "answer": "1"})", "\"messages\" must be a non-empty array"},
      {R"({"messages": {"role": "user"}, "answer": "1"})", "\"messages\" must be a non-empty array"},
      {R"({"messages": ["hi"], "answer": "1"})", "\"messages\"[0] must be an object"},
      {R"({"messages": [{"content": "hi"}], "answer": "1"})", "\"messages\"[0] needs a string \"role\""},
      {R"({"messages": [{"role": "user", "content": 3}], "answer": "1"})", "needs a string \"content\""},
      {R"({"messages": [{"role": "robot", "content": "hi"}], "answer": "1"})", "has role \"robot\""},
      {R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "1"}], "answer": "1"})",
       "the last message must be a non-empty user turn"},
      {R"({"prompt": "a", "messages": [{"role": "user", "content": "hi"}], "answer": "1"})",
       "has both \"prompt\" and \"messages\""},
  };
  for (const Case& c : cases) {
    std::string e = load_error(ok + c.line + "\n" + ok);
    EXPECT_NE(e.find("bad.jsonl:2: "), std::string::npos) << e;
    EXPECT_NE(e.find(c.want), std::string::npos) << e;
  }
}

TEST_F(JsonlTest, MathVerifierWithNumberAndSolutionAnswers) {
  std::string f = write("math.jsonl",
                        "{\"prompt\": \"clips?\", \"answer\": \"48/2 = 24\\n48+24 = 72\\n#### 72\"}\n"
                        "{\"prompt\": \"eggs?\", \"answer\": 18}\n"
                        "{\"prompt\": \"half?\", \"answer\": \"\\\\frac{1}{2}\"}\n");
  auto task = load_jsonl_task({.file = f, .verifier = VerifierKind::kMath,
                               .common = {.held_out_fraction = 0, .format_reward = 0.2}});
  TaskItem clips{"c", "clips?", "48/2 = 24\n48+24 = 72\n#### 72"};
  EXPECT_EQ(task->reward(clips, "She sold 72 in all.\n#### 72"), 1.0);
  EXPECT_EQ(task->reward(clips, "The answer is $\\boxed{72}$."), 1.0);
  EXPECT_EQ(task->reward(clips, "\\boxed{71}"), 0.2);
  EXPECT_EQ(task->reward(clips, "72"), 0.0);  // no final-answer marker
  EXPECT_EQ(task->reward(clips, clips.answer), 1.0);  // a full-solution reference scores itself
  TaskItem eggs = task->item(Split::kTrain, 0);
  for (uint64_t i = 0; i < 3; ++i) {
    if (task->item(Split::kTrain, i).prompt == "eggs?") eggs = task->item(Split::kTrain, i);
  }
  EXPECT_EQ(eggs.answer, "18");  // a JSON number keeps its JSON text
  EXPECT_EQ(task->reward(eggs, "so \\boxed{18.0}"), 1.0);
  TaskItem half{"h", "half?", "\\frac{1}{2}"};
  EXPECT_EQ(task->reward(half, "\\boxed{0.5}"), 1.0);

  for (const char* bad : {"\"#### \"", "\"$ $\"", "\"\\\\boxed{}\"", "\"\\\\boxed{3\""}) {
    std::string e = load_error("{\"prompt\": \"a\", \"answer\": 4}\n{\"prompt\": \"b\", \"answer\": " +
                                   std::string(bad) + "}\n",
                               VerifierKind::kMath);
    EXPECT_NE(e.find("bad.jsonl:2: \"answer\""), std::string::npos) << e;
    EXPECT_NE(e.find("yields no final answer"), std::string::npos) << e;
  }
}

TEST_F(JsonlTest, ThinkOptionAppliesToEveryVerifier) {
  std::string f = numbers_file(50);
  auto parse = [&](const std::string& verifier, const std::string& think) {
    ConfigDoc doc = ConfigDoc::parse("[task]\nname = \"jsonl\"\nfile = \"" + f + "\"\nverifier = \"" + verifier +
                                         "\"\nthink = \"" + think + "\"\nformat_reward = 0.1\nheld_out_fraction = 0\n",
                                     "job.toml");
    ConfigTable t = doc.root().table("task");
    std::unique_ptr<Task> task = make_task(t);
    t.done();
    return task;
  };
  TaskItem it{"i", "2*2=", "4"};
  auto exact_required = parse("exact", "required");
  EXPECT_EQ(exact_required->reward(it, "<think>2 twos</think>\n4"), 1.0);
  EXPECT_EQ(exact_required->reward(it, "4"), 0.0);
  auto numeric_required = parse("numeric", "required");
  EXPECT_EQ(numeric_required->reward(it, "<think>x</think> 4.0"), 1.0);
  EXPECT_EQ(numeric_required->reward(it, "<think>x</think> 5"), 0.1);
  EXPECT_EQ(numeric_required->reward(it, "<think>x 5"), 0.0);  // broken format: no format_reward
  auto math_required = parse("math", "required");
  EXPECT_EQ(math_required->reward(it, "<think>maybe \\boxed{5}</think>\\boxed{4}"), 1.0);
  EXPECT_EQ(math_required->reward(it, "<think>surely \\boxed{4}</think>\\boxed{5}"), 0.1);
  EXPECT_EQ(math_required->reward(it, "<think>\\boxed{4}</think>"), 0.0);  // the answer is judged after </think>
  EXPECT_EQ(math_required->reward(it, "\\boxed{4}"), 0.0);
  auto math_optional = parse("math", "optional");
  EXPECT_EQ(math_optional->reward(it, "\\boxed{4}"), 1.0);
  EXPECT_EQ(math_optional->reward(it, "<think>\\boxed{4}"), 0.0);
  TaskItem templated{"t", "2*2=<think>\n", "4"};  // the chat template opened the block
  EXPECT_EQ(math_optional->reward(templated, "two twos</think>\\boxed{4}"), 1.0);
  auto math_off = parse("math", "off");
  EXPECT_EQ(math_off->reward(it, "<think>\\boxed{5}"), 0.1);
  ConfigDoc doc = ConfigDoc::parse("[task]\nname = \"jsonl\"\nfile = \"" + f + "\"\nthink = \"yes\"\n", "job.toml");
  ConfigTable t = doc.root().table("task");
  EXPECT_THROW(make_task(t), Error);
}

TEST_F(JsonlTest, MissingFileAndConfig) {
  try {
    load_jsonl_task({.file = (dir_ / "absent.jsonl").string()});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("absent.jsonl"), std::string::npos);
  }
  std::string f = numbers_file(300);
  ConfigDoc doc = ConfigDoc::parse("[task]\nname = \"jsonl\"\nfile = \"" + f +
                                       "\"\nverifier = \"numeric\"\nheld_out_fraction = 0.1\n",
                                   "job.toml");
  ConfigTable t = doc.root().table("task");
  auto task = make_task(t);
  t.done();
  EXPECT_EQ(task->name(), "jsonl");
  EXPECT_EQ(task->limits().max_prompt_chars, 6u);  // "299*2="
  EXPECT_EQ(task->limits().max_answer_chars, 3u);  // "598"
}

}  // namespace
}  // namespace moerl::tasks
