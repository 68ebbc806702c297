// The one dtype parser: every alias, case and blanks, canonical names, and the error listing
// the accepted spellings.
#include "base/dtype.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace moerl {
namespace {

TEST(DType, EveryAliasParsesToItsType) {
  for (const char* s : {"float32", "fp32", "f32", "FP32", " Float32 "}) EXPECT_EQ(parse_dtype(s, "x"), DType::kFloat32) << s;
  for (const char* s : {"bfloat16", "bf16", "BF16"}) EXPECT_EQ(parse_dtype(s, "x"), DType::kBFloat16) << s;
  for (const char* s : {"float16", "fp16", "f16", "half"}) EXPECT_EQ(parse_dtype(s, "x"), DType::kFloat16) << s;
  for (const char* s : {"float64", "fp64", "f64", "double"}) EXPECT_EQ(parse_dtype(s, "x"), DType::kFloat64) << s;
  for (DType d : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFloat64}) {
    EXPECT_EQ(parse_dtype(dtype_name(d), "x"), d);
    EXPECT_EQ(parse_dtype(dtype_short_name(d), "x"), d);
  }
  EXPECT_STREQ(dtype_name(DType::kBFloat16), "bfloat16");
  EXPECT_STREQ(dtype_short_name(DType::kFloat32), "fp32");
}

TEST(DType, SupportedSetLimitsTheTypes) {
  EXPECT_EQ(parse_dtype("f32", "--dtype", {DType::kBFloat16, DType::kFloat32}), DType::kFloat32);
  try {
    parse_dtype("half", "--dtype", {DType::kBFloat16, DType::kFloat32});
    ADD_FAILURE() << "float16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--dtype = \"half\" (float16) is not supported"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("bfloat16, float32"), std::string::npos) << e.hint();
  }
}

TEST(DType, UnknownSpellingNamesTheKeyAndListsTheAccepted) {
  for (const char* s : {"", "f8", "bfloat", "int8", "float 32"}) {
    try {
      parse_dtype(s, "model.dtype");
      ADD_FAILURE() << "accepted '" << s << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find("model.dtype = \"" + std::string(s) + "\""), std::string::npos) << e.what();
      EXPECT_NE(e.hint().find("bf16"), std::string::npos) << e.hint();
      EXPECT_NE(e.hint().find("double"), std::string::npos) << e.hint();
    }
  }
}

}  // namespace
}  // namespace moerl
