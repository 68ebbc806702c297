#include "base/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace moerl {
namespace {

const char* kDoc = R"(
[train]
lr = 1e-4
steps = 20
mode = "sync"
[model]
experts = [1, 2]
)";

TEST(Config, ReadsTypedValuesAndOverrides) {
  ConfigDoc doc = ConfigDoc::parse(kDoc, "t.toml", {"train.steps=40", "model.name=tiny"});
  ConfigTable train = doc.root().table("train");
  EXPECT_DOUBLE_EQ(train.number("lr", 0), 1e-4);
  EXPECT_EQ(train.integer("steps", 0), 40);
  EXPECT_EQ(train.choice("mode", "async", {"sync", "async"}), "sync");
  EXPECT_EQ(train.integer("absent", 7), 7);
  train.done();
  ConfigTable model = doc.root().table("model");
  EXPECT_EQ(model.string("name", ""), "tiny");
  EXPECT_EQ(model.integers("experts", {}), (std::vector<int64_t>{1, 2}));
  model.done();
}

TEST(Config, ErrorsNameKeyAndAcceptedValues) {
  ConfigDoc doc = ConfigDoc::parse(kDoc, "t.toml", {"train.mode=fast"});
  ConfigTable train = doc.root().table("train");
  try {
    train.choice("mode", "sync", {"sync", "async"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.mode"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sync, async"), std::string::npos) << e.what();
  }
  EXPECT_THROW(train.integer("lr", 0), Error);                      // float is not an integer
  EXPECT_THROW(train.number("steps", 0, {.min = 0, .max = 10}), Error);  // out of range
}

TEST(Config, UnknownKeysRejected) {
  ConfigDoc doc = ConfigDoc::parse(kDoc, "t.toml");
  ConfigTable train = doc.root().table("train");
  train.number("lr", 0);
  try {
    train.done();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("steps"), std::string::npos) << e.what();
  }
}

TEST(Config, SyntaxErrorNamesLine) {
  try {
    ConfigDoc::parse("[a]\nx = = 1\n", "bad.toml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.toml:2"), std::string::npos) << e.what();
  }
}

// The effective config a run writes (and its worker processes read back) keeps every string
// exactly: a stop string that starts with a newline lost it when written as a multi-line
// literal (''' trims a newline right after the opening delimiter), so the workers stopped at
// "\n" where the trainer's config said "\n\n".
TEST(ConfigDoc, TheEffectiveTomlReadsBackEveryStringExactly) {
  const std::vector<std::string> odd = {"\n\n", "\nx", "a\tb", "it's", "'''", "\"q\"", "\\", "\r\n", "\xc3\xa9\n"};
  std::string text = "[rollout]\nstop = [";
  for (size_t i = 0; i < odd.size(); ++i) text += (i ? ", " : "") + nlohmann::json(odd[i]).dump();
  text += "]\n";
  ConfigDoc doc = ConfigDoc::parse(text, "t.toml", {"rollout.extra=[\"\\n\\n\"]"});
  ConfigDoc back = ConfigDoc::parse(doc.to_toml(), "effective.toml");
  ConfigTable r = back.root().table("rollout");
  EXPECT_EQ(r.strings("stop", {}), odd) << doc.to_toml();
  EXPECT_EQ(r.strings("extra", {}), std::vector<std::string>{"\n\n"}) << doc.to_toml();
}

}  // namespace
}  // namespace moerl
