// The interpreter against jinja2 itself: every case of tests/fixtures/jinja/cases.json
// rendered as transformers renders chat templates (expected.json, made by
// tests/fixtures/make_tokenizer_refs.py); an "error" entry means the render must throw.
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "base/error.h"
#include "model/jinja/template.h"

namespace moerl::jinja {
namespace {

std::string fixture(const std::string& rel) {
  const char* s = std::getenv("MOERL_SOURCE_DIR");
  return std::string(s ? s : ".") + "/tests/fixtures/jinja/" + rel;
}

nlohmann::ordered_json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  return nlohmann::ordered_json::parse(f);
}

TEST(JinjaCases, EveryFixtureCaseRendersAsJinja2Does) {
  const auto cases = read_json(fixture("cases.json"));
  const auto expected = read_json(fixture("expected.json"));
  ASSERT_EQ(cases.size(), expected.size());
  ASSERT_GT(cases.size(), 40u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto& want = expected[i];
    ASSERT_EQ(c.at("name"), want.at("name"));
    const std::string name = c.at("name").get<std::string>();
    if (want.contains("error")) {
      EXPECT_THROW(Template(c.at("template").get<std::string>()).render(c.at("context")), Error) << name;
      continue;
    }
    try {
      const std::string got = Template(c.at("template").get<std::string>()).render(c.at("context"));
      EXPECT_EQ(got, want.at("output").get<std::string>()) << "case " << name;
    } catch (const Error& e) {
      ADD_FAILURE() << "case " << name << " threw: " << e.what();
    }
  }
}

}  // namespace
}  // namespace moerl::jinja
