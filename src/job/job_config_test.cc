// [model] device / dtype / rollout_dtype: parsed and validated by JobConfig, turned into the
// ModelOptions every role builds its model from.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "job/job_config.h"

namespace moerl::job {
namespace {

JobConfig parse_with_model(const std::string& model_keys) {
  const std::string text = "[model]\n" + model_keys + "\n[task]\nname = \"addition\"\ndigits = 1\n";
  return JobConfig::parse(ConfigDoc::parse(text, "device.toml"));
}

TEST(JobConfigDevice, DefaultsToFloat32OnTheCpuForEveryRole) {
  JobConfig j = parse_with_model("");
  for (bool rollout : {false, true}) {
    model::ModelOptions o = j.model.options(rollout);
    EXPECT_EQ(o.device, at::Device(at::kCPU));
    EXPECT_EQ(o.dtype, at::kFloat);
  }
}

TEST(JobConfigDevice, RolloutDtypeAppliesOnlyToWorkers) {
  JobConfig j = parse_with_model("dtype = \"float32\"\nrollout_dtype = \"bfloat16\"");
  EXPECT_EQ(j.model.options(false).dtype, at::kFloat);
  EXPECT_EQ(j.model.options(true).dtype, at::kBFloat16);
  JobConfig same = parse_with_model("dtype = \"bfloat16\"");
  EXPECT_EQ(same.model.options(true).dtype, at::kBFloat16);  // rollout_dtype defaults to dtype
}

TEST(JobConfigDevice, DtypeKeysTakeTheCommonSpellings) {
  JobConfig j = parse_with_model("dtype = \"fp32\"\nrollout_dtype = \"bf16\"");
  EXPECT_EQ(j.model.options(false).dtype, at::kFloat);
  EXPECT_EQ(j.model.options(true).dtype, at::kBFloat16);
  EXPECT_EQ(parse_with_model("dtype = \"BFloat16\"").model.options(false).dtype, at::kBFloat16);
  EXPECT_EQ(parse_with_model("dtype = \"f32\"").model.options(true).dtype, at::kFloat);
  try {
    parse_with_model("rollout_dtype = \"bf15\"");
    FAIL() << "bf15 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.rollout_dtype = \"bf15\" is not a dtype"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("bfloat16"), std::string::npos) << e.hint();
  }
}

TEST(JobConfigDevice, BadDeviceOrMissingGpuIsAnErrorNamingTheKey) {
  try {
    parse_with_model("device = \"gpu0\"");
    FAIL() << "device = gpu0 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.device"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_with_model("dtype = \"float16\""), Error);
  if (at::hasCUDA()) GTEST_SKIP() << "a GPU is visible: model.device = cuda is valid here";
  JobConfig j = parse_with_model("device = \"cuda\"");  // parses: configs are rendered on CPU hosts
  try {
    j.model.options(false);
    FAIL() << "model.device = cuda was accepted without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.device"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moerl::job

namespace moerl::job {
namespace {

JobConfig parse_text(const std::string& text) {
  return JobConfig::parse(ConfigDoc::parse(text + "\n[task]\nname = \"addition\"\ndigits = 1\n", "stop.toml"));
}

TEST(JobConfigStop, RolloutStopStringsReachTheRolloutConfig) {
  EXPECT_TRUE(parse_text("").rollout.gen.stop.empty());
  JobConfig j = parse_text("[rollout]\nstop = [\"</answer>\", \"\\n\\n\"]");
  EXPECT_EQ(j.rollout.gen.stop, (std::vector<std::string>{"</answer>", "\n\n"}));
  try {
    parse_text("[rollout]\nstop = [\"</answer>\", \"\"]");
    ADD_FAILURE() << "an empty stop string was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rollout.stop"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moerl::job
