// safetensors reader and writer, libtorch-free (fuzzed under clang sanitizers).
// The reader memory-maps the file and validates the whole header before handing out
// pointers; the writer lays tensors out aligned and replaces the target atomically.
// Format as moerl reads/writes it: docs/formats/safetensors.md.
//
//   SafetensorsFile f = SafetensorsFile::open("ckpt/model.safetensors");
//   for (const std::string& name : f.names()) {
//     const TensorInfo& t = f.info(name);   // t.dtype, t.shape, t.data (mapped), t.nbytes
//   }
//   SafetensorsWriter w;
//   w.add("x", DType::kF32, {2, 3}, ptr, 24);  // ptr must stay valid until write()
//   w.write("out.safetensors", {{"format", "pt"}});
//
// Failure: every malformed input is a moerl::Error naming the file, the tensor and a HINT
// (never a crash, never a read outside the file). Thread-safety: a SafetensorsFile is
// immutable after open() and may be read from many threads; a writer is single-threaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moerl::io {

enum class DType { kF32, kBF16, kF16, kI64, kI32, kU8, kBool };

// "F32", "BF16", "F16", "I64", "I32", "U8", "BOOL" (the safetensors header spelling).
const char* dtype_name(DType dtype);
// Bytes per element (BOOL is one byte).
size_t dtype_size(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;     // [] is a scalar (one element)
  const uint8_t* data = nullptr;  // into the mapping; valid while the SafetensorsFile lives
  size_t nbytes = 0;
  size_t offset = 0;              // of the first byte, relative to the data section
  int64_t numel() const;
};

// Largest header accepted (same bound as the reference reader): guards allocations.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100u << 20;

class SafetensorsFile {
 public:
  // Maps `path` read-only (pages load lazily) and validates it.
  static SafetensorsFile open(const std::string& path);
  // Validates an in-memory image; `data` must outlive the result (nothing is copied).
  // `source_name` names the input in error messages.
  static SafetensorsFile parse(const uint8_t* data, size_t size, const std::string& source_name);

  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile() = default;

  // Tensor names, sorted.
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // Error (kNotFound) naming the file and tensor when absent.
  const TensorInfo& info(const std::string& name) const;
  // The optional "__metadata__" string map (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& source_name() const { return source_name_; }
  size_t size_bytes() const { return size_; }
  size_t header_bytes() const { return header_bytes_; }

 private:
  SafetensorsFile() = default;
  void parse_header();

  std::string source_name_;
  const uint8_t* base_ = nullptr;  // whole file image
  size_t size_ = 0;
  size_t header_bytes_ = 0;        // N, the JSON header length
  std::vector<std::string> names_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  std::shared_ptr<const void> mapping_;  // owns the mmap (open()); empty for parse()
};

class SafetensorsWriter {
 public:
  // Registers a tensor; `data` is NOT copied and must stay valid until write() returns.
  // Error if the name repeats, is "__metadata__", or nbytes != numel * dtype_size.
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
           size_t nbytes);
  // Writes header + data through a base/files AtomicFile (temp file beside `path`, fsync,
  // rename over `path`). Error (kIo) on failure, leaving any previous `path` untouched.
  void write(const std::string& path, const std::map<std::string, std::string>& metadata = {}) const;
  // Sum of tensor bytes added so far.
  size_t data_bytes() const { return data_bytes_; }
  size_t num_tensors() const { return entries_.size(); }

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    const void* data;
    size_t nbytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, size_t> index_;
  size_t data_bytes_ = 0;
};

}  // namespace moerl::io
