// Little-endian byte writer/reader used by the runtime's record encodings (records.cc).
// Internal to runtime/. The reader bounds-checks every read and throws moerl::Error naming
// the record kind and the byte offset, so a truncated or corrupt record never reads past
// its buffer. Not thread-safe (one object per encode/decode).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/error.h"

namespace moerl::runtime {

class ByteWriter {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_arithmetic_v<T>);
    // NOTE: x86-64 and aarch64 are little-endian; the format is little-endian.
    const auto* p = reinterpret_cast<const char*>(&v);
    out_.append(p, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  template <typename T>
  void put_vector(const std::vector<T>& v) {
    static_assert(std::is_arithmetic_v<T>);
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

class ByteReader {
 public:
  ByteReader(std::string_view in, const char* what) : in_(in), what_(what) {}
  template <typename T>
  T get() {
    static_assert(std::is_arithmetic_v<T>);
    need(sizeof(T));
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string get_string() {
    uint32_t n = get<uint32_t>();
    need(n);
    std::string s(in_.data() + pos_, n);
    pos_ += n;
    return s;
  }
  template <typename T>
  std::vector<T> get_vector() {
    uint64_t n = get<uint32_t>();
    need(n * sizeof(T));
    std::vector<T> v(n);
    if (n > 0) std::memcpy(v.data(), in_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  size_t remaining() const { return in_.size() - pos_; }
  size_t pos() const { return pos_; }

 private:
  void need(uint64_t n) const {
    if (n > in_.size() - pos_) {
      throw Error(std::string(what_) + ": truncated at byte " + std::to_string(pos_) + " (need " +
                      std::to_string(n) + " more bytes, " + std::to_string(in_.size() - pos_) +
                      " left)",
                  "the record was cut short or corrupted in transit; it cannot be decoded",
                  ErrorCode::kIo);
    }
  }

  std::string_view in_;
  const char* what_;
  size_t pos_ = 0;
};

// Record framing shared by every runtime format: magic[4], u16 version, u16 flags (0),
// u32 payload length, u32 crc32c(payload), payload. unframe_record checks all of it and
// throws moerl::Error(kIo) naming `what` on any mismatch (records.cc).
std::string frame_record(const char magic[4], uint16_t version, const std::string& payload);
std::string_view unframe_record(std::string_view bytes, const char magic[4], uint16_t version,
                                const char* what);
// As above, accepting any version in [min_version, max_version]; *got_version receives it.
std::string_view unframe_record(std::string_view bytes, const char magic[4], uint16_t min_version,
                                uint16_t max_version, uint16_t* got_version, const char* what);

}  // namespace moerl::runtime
