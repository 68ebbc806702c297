// Test-only reader of TensorBoard event files, independent of the writer's code: its own
// bitwise CRC-32C (the Castagnoli polynomial, reflected), its own TFRecord framing parser
// checking both masked CRCs of every record, and protobuf's parser (the generated classes of
// io/tb/tb_event.proto) for the Event messages.
//
//   std::vector<moerl::tb::Event> events = moerl::tb::testing::read_events(path);
// Any framing or CRC fault is a gtest failure naming the record and offset.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "io/tb/tb_event.pb.h"

namespace moerl::tb::testing {

inline uint32_t reference_crc32c(const unsigned char* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
  }
  return ~c;
}

inline uint32_t reference_masked(const unsigned char* p, size_t n) {
  const uint32_t c = reference_crc32c(p, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

inline uint64_t le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// The records' payloads, framing and both CRCs checked.
inline std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(bytes.empty()) << path << " is empty or missing";
  std::vector<std::string> out;
  size_t off = 0;
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  while (off < bytes.size()) {
    if (bytes.size() - off < 12) {
      ADD_FAILURE() << path << ": truncated record header at offset " << off;
      break;
    }
    const uint64_t len = le(b + off, 8);
    EXPECT_EQ(le(b + off + 8, 4), reference_masked(b + off, 8)) << "length CRC of record " << out.size();
    if (bytes.size() - off - 12 < len + 4) {
      ADD_FAILURE() << path << ": record " << out.size() << " at offset " << off << " overruns the file";
      break;
    }
    EXPECT_EQ(le(b + off + 12 + len, 4), reference_masked(b + off + 12, len)) << "data CRC of record " << out.size();
    out.emplace_back(bytes.substr(off + 12, len));
    off += 12 + len + 4;
  }
  return out;
}

inline std::vector<Event> read_events(const std::string& path) {
  std::vector<Event> events;
  for (const std::string& rec : read_records(path)) {
    Event e;
    EXPECT_TRUE(e.ParseFromString(rec)) << "record " << events.size() << " of " << path << " is not an Event";
    events.push_back(std::move(e));
  }
  return events;
}

}  // namespace moerl::tb::testing
