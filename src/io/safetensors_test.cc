// safetensors core: valid files parse to the right views, the writer's layout, and every
// malformed input (crafted byte by byte) is an Error naming the problem.

#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/files.h"

namespace moerl::io {
namespace {

// An image: 8-byte LE length, header, data. `declared_len` overrides the length field.
std::vector<uint8_t> image(const std::string& header, const std::vector<uint8_t>& data,
                           std::optional<uint64_t> declared_len = std::nullopt) {
  uint64_t n = declared_len.value_or(header.size());
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    SafetensorsFile::parse(bytes.data(), bytes.size(), "crafted.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_ERROR_HAS(bytes, text)                                       \
  do {                                                                      \
    std::string msg_ = error_of(bytes);                                     \
    EXPECT_NE(msg_.find(text), std::string::npos) << msg_;                  \
    EXPECT_NE(msg_.find("crafted.safetensors"), std::string::npos) << msg_; \
    EXPECT_NE(msg_.find("HINT"), std::string::npos) << msg_;                \
  } while (0)

std::vector<uint8_t> bytes_0_to(size_t n) {
  std::vector<uint8_t> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(i * 7 + 1);
  return d;
}

TEST(Safetensors, DTypeTable) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kI64, DType::kI32, DType::kU8,
                  DType::kBool}) {
    EXPECT_EQ(dtype_from_name(dtype_name(d)), d);
  }
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kBool), 1u);
  EXPECT_FALSE(dtype_from_name("F64").has_value());
}

TEST(Safetensors, ParsesValidImageWithGapAndMetadata) {
  // a: F32 [2] at [0,8); gap [8,12); b: U8 [2,2] at [12,16); e: empty I64 [0,3].
  std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"U8","shape":[2,2],"data_offsets":[12,16]},)"
      R"("e":{"dtype":"I64","shape":[0,3],"data_offsets":[4,4]}})";
  std::vector<uint8_t> data = bytes_0_to(16);
  std::vector<uint8_t> img = image(header, data);
  SafetensorsFile f = SafetensorsFile::parse(img.data(), img.size(), "ok");
  ASSERT_EQ(f.names(), (std::vector<std::string>{"a", "b", "e"}));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const TensorInfo& a = f.info("a");
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(a.nbytes, 8u);
  EXPECT_EQ(std::memcmp(a.data, data.data(), 8), 0);
  const TensorInfo& b = f.info("b");
  EXPECT_EQ(b.numel(), 4);
  EXPECT_EQ(b.data[0], data[12]);
  EXPECT_EQ(b.data[3], data[15]);
  EXPECT_EQ(f.info("e").numel(), 0);
  EXPECT_EQ(f.header_bytes(), header.size());
}

TEST(Safetensors, ScalarAndEmptyHeader) {
  std::vector<uint8_t> img =
      image(R"({"s":{"dtype":"I32","shape":[],"data_offsets":[0,4]}})", bytes_0_to(4));
  SafetensorsFile f = SafetensorsFile::parse(img.data(), img.size(), "scalar");
  EXPECT_EQ(f.info("s").numel(), 1);
  std::vector<uint8_t> empty = image("{}", {});
  EXPECT_TRUE(SafetensorsFile::parse(empty.data(), empty.size(), "empty").names().empty());
}

TEST(Safetensors, RejectsTruncatedAndBadLength) {
  std::vector<uint8_t> five = {1, 0, 0, 0, 0};
  EXPECT_ERROR_HAS(five, "shorter than the 8-byte header length");
  EXPECT_ERROR_HAS(image("{}", {}, 3), "runs past the end of the file");
  EXPECT_ERROR_HAS(image("{}", {}, ~uint64_t(0)), "runs past the end of the file");
  // A valid file cut short inside the data section.
  std::vector<uint8_t> img =
      image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", bytes_0_to(16));
  img.resize(img.size() - 5);
  EXPECT_ERROR_HAS(img, "out of range of the data section");
}

TEST(Safetensors, RejectsBadHeaders) {
  EXPECT_ERROR_HAS(image("{not json", {}), "not valid JSON");
  EXPECT_ERROR_HAS(image("[1,2]", {}), "expected an object");
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}})", {0}),
                   "unknown dtype 'Q7'");
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", {0}),
                   "non-negative integers");
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", {0}),
                   "non-negative integers");
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"U8","shape":3,"data_offsets":[0,1]}})", {0}),
                   "shape is missing or not a list");
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", {0}),
                   "data_offsets must be [begin, end]");
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"U8","shape":[1]}})", {0}),
                   "data_offsets must be [begin, end]");
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[1,0]}})", {0}),
                   "end before begin");
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",
                         bytes_0_to(4)),
                   "needs 8 bytes but data_offsets span 4");
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", {0}),
                   "unknown field 'x'");
  EXPECT_ERROR_HAS(image(R"({"a":[1]})", {0}), "entry must be an object");
  EXPECT_ERROR_HAS(image(R"({"__metadata__":{"k":1}})", {}), "must be a string");
  // Shape whose byte size overflows 64 bits.
  EXPECT_ERROR_HAS(
      image(R"({"a":{"dtype":"I64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", {}),
      "too many");
}

TEST(Safetensors, RejectsOverlapOutOfRangeAndDuplicates) {
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                         bytes_0_to(6)),
                   "overlaps tensor 'a'");
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                         bytes_0_to(4)),
                   "overlaps");
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}})",
                         bytes_0_to(8)),
                   "out of range of the data section (8 bytes)");
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                         R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                         bytes_0_to(2)),
                   "names 'a' twice");
}

TEST(Safetensors, MissingTensorNamesFileAndTensor) {
  std::vector<uint8_t> img =
      image(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", {9});
  SafetensorsFile f = SafetensorsFile::parse(img.data(), img.size(), "one.safetensors");
  try {
    f.info("model.norm.weight");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("one.safetensors"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("model.norm.weight"), std::string::npos);
  }
}

class SafetensorsFiles : public ::testing::Test {
 protected:
  std::string path(const std::string& name) { return ::testing::TempDir() + "/moerl_io_" + std::to_string(::getpid()) + "_" + name; }
};

TEST_F(SafetensorsFiles, WriterLayoutAndReadBack) {
  std::mt19937 rng(3);
  std::vector<float> f32(15);
  for (auto& v : f32) v = std::uniform_real_distribution<float>(-2, 2)(rng);
  std::vector<int64_t> i64 = {7, -3, 1LL << 40};
  std::vector<uint8_t> u8 = {1, 2, 3};
  std::vector<uint16_t> bf16 = {0x3f80, 0xbf80, 0x4000};
  SafetensorsWriter w;
  w.add("u", DType::kU8, {3}, u8.data(), 3);
  w.add("f", DType::kF32, {3, 5}, f32.data(), f32.size() * 4);
  w.add("b", DType::kBF16, {3}, bf16.data(), 6);
  w.add("i", DType::kI64, {3}, i64.data(), 24);
  std::string p = path("writer.safetensors");
  w.write(p, {{"format", "pt"}, {"step", "12"}});

  std::ifstream in(p, std::ios::binary);
  std::vector<uint8_t> raw((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GE(raw.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | raw[i];
  EXPECT_EQ((8 + n) % 8, 0u) << "data section must start 8-aligned";
  EXPECT_EQ(raw[8], '{');
  EXPECT_EQ(raw.size(), 8 + n + w.data_bytes());
  const std::string written = std::filesystem::path(p).filename().string();
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(p).parent_path())) {
    EXPECT_NE(atomic_temp_target(e.path().filename().string()), written) << "temp file left behind: " << e.path();
  }

  SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_EQ(f.metadata().at("step"), "12");
  EXPECT_EQ(f.names().size(), 4u);
  for (const std::string& name : f.names()) {
    const TensorInfo& t = f.info(name);
    EXPECT_EQ(t.offset % dtype_size(t.dtype), 0u) << name << " misaligned";
  }
  EXPECT_EQ(std::memcmp(f.info("f").data, f32.data(), 60), 0);
  EXPECT_EQ(std::memcmp(f.info("i").data, i64.data(), 24), 0);
  EXPECT_EQ(std::memcmp(f.info("b").data, bf16.data(), 6), 0);
  EXPECT_EQ(std::memcmp(f.info("u").data, u8.data(), 3), 0);
  EXPECT_EQ(f.info("f").shape, (std::vector<int64_t>{3, 5}));
  std::remove(p.c_str());
}

TEST_F(SafetensorsFiles, WriterRejectsBadAdds) {
  SafetensorsWriter w;
  float x[2] = {1, 2};
  w.add("x", DType::kF32, {2}, x, 8);
  EXPECT_THROW(w.add("x", DType::kF32, {2}, x, 8), Error);
  EXPECT_THROW(w.add("y", DType::kF32, {3}, x, 8), Error);
  EXPECT_THROW(w.add("__metadata__", DType::kF32, {2}, x, 8), Error);
  EXPECT_THROW(w.write("/nonexistent-dir/x.safetensors"), Error);
}

TEST_F(SafetensorsFiles, OpenErrors) {
  try {
    SafetensorsFile::open(path("does-not-exist.safetensors"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
  std::string p = path("short.safetensors");
  {
    std::ofstream out(p, std::ios::binary);
    out << "abc";
  }
  try {
    SafetensorsFile::open(p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shorter than the 8-byte"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos);
  }
  std::remove(p.c_str());
}

}  // namespace
}  // namespace moerl::io
