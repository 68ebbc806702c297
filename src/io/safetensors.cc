// safetensors: mmap reader with full header validation (the writer: safetensors_writer.cc).
// No libtorch here: this file is also built under libFuzzer + ASan + UBSan.

#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/safetensors_shape.h"

namespace moerl::io {
namespace {

using detail::byte_size;
using detail::shape_str;

using nlohmann::json;

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; moerl copies bytes as they are");

constexpr char kFormatHint[] =
    "the file is not a valid safetensors file (truncated download or a different format?); "
    "re-export it with safetensors.torch.save_file or transformers save_pretrained";

struct DTypeRow {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeRow kDTypes[] = {
    {DType::kF32, "F32", 4}, {DType::kBF16, "BF16", 2}, {DType::kF16, "F16", 2},
    {DType::kI64, "I64", 8}, {DType::kI32, "I32", 4},   {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},
};

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Rejects duplicate keys at any depth (plain nlohmann parsing keeps the last one silently).
json parse_header_json(const char* text, size_t n, const std::string& source) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
            duplicate.empty()) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text, text + n, callback);
  } catch (const json::exception& e) {
    throw Error(source + ": header is not valid JSON (" + e.what() + ")", kFormatHint);
  }
  if (!duplicate.empty()) {
    throw Error(source + ": header names '" + duplicate + "' twice",
                "each tensor name (and each field of an entry) may appear once; the file was "
                "written by a broken exporter");
  }
  return j;
}

}  // namespace

const char* dtype_name(DType dtype) {
  for (const DTypeRow& r : kDTypes) {
    if (r.dtype == dtype) return r.name;
  }
  return "?";
}

size_t dtype_size(DType dtype) {
  for (const DTypeRow& r : kDTypes) {
    if (r.dtype == dtype) return r.size;
  }
  return 0;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DTypeRow& r : kDTypes) {
    if (name == r.name) return r.dtype;
  }
  return std::nullopt;
}

int64_t TensorInfo::numel() const {
  // NOTE: a zero dimension may sit beside huge ones; check first so the product cannot overflow.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw Error("cannot open safetensors file '" + path + "': " + std::strerror(errno),
                "check the path; a checkpoint directory holds model.safetensors or "
                "model.safetensors.index.json",
                errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("'" + path + "' is not a regular file", "pass a .safetensors file",
                ErrorCode::kInvalidInput);
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    throw Error(path + ": file is " + std::to_string(size) +
                    " bytes, shorter than the 8-byte header length",
                kFormatHint);
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int mmap_errno = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (p == MAP_FAILED) {
    throw Error("cannot mmap '" + path + "': " + std::strerror(mmap_errno),
                "check free address space and that the file is on a local file system",
                ErrorCode::kIo);
  }
  SafetensorsFile f;
  f.mapping_ = std::shared_ptr<const void>(p, [size](const void* q) {
    ::munmap(const_cast<void*>(q), size);
  });
  f.source_name_ = path;
  f.base_ = static_cast<const uint8_t*>(p);
  f.size_ = size;
  f.parse_header();
  return f;
}

SafetensorsFile SafetensorsFile::parse(const uint8_t* data, size_t size,
                                       const std::string& source_name) {
  SafetensorsFile f;
  f.source_name_ = source_name;
  f.base_ = data;
  f.size_ = size;
  f.parse_header();
  return f;
}

void SafetensorsFile::parse_header() {
  const std::string& src = source_name_;
  if (size_ < 8 || base_ == nullptr) {
    throw Error(src + ": file is " + std::to_string(size_) +
                    " bytes, shorter than the 8-byte header length",
                kFormatHint);
  }
  const uint64_t n = read_le64(base_);
  if (n > size_ - 8) {
    throw Error(src + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                    std::to_string(size_) + " bytes)",
                kFormatHint);
  }
  if (n > kMaxSafetensorsHeaderBytes) {
    throw Error(src + ": header length " + std::to_string(n) + " exceeds the " +
                    std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit",
                kFormatHint);
  }
  header_bytes_ = static_cast<size_t>(n);
  const json j = parse_header_json(reinterpret_cast<const char*>(base_ + 8), header_bytes_, src);
  if (!j.is_object()) {
    throw Error(src + ": header is a JSON " + std::string(j.type_name()) + ", expected an object",
                kFormatHint);
  }
  const uint8_t* data = base_ + 8 + header_bytes_;
  const size_t data_size = size_ - 8 - header_bytes_;

  for (const auto& [name, entry] : j.items()) {
    const std::string where = src + ": tensor '" + name + "'";
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        throw Error(src + ": __metadata__ must be an object of strings, got " +
                        std::string(entry.type_name()),
                    kFormatHint);
      }
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) {
          throw Error(src + ": __metadata__['" + k + "'] must be a string, got " +
                          std::string(v.type_name()),
                      "safetensors metadata maps strings to strings");
        }
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) {
      throw Error(where + ": entry must be an object {dtype, shape, data_offsets}, got " +
                      std::string(entry.type_name()),
                  kFormatHint);
    }
    for (const auto& [k, v] : entry.items()) {
      if (k != "dtype" && k != "shape" && k != "data_offsets") {
        throw Error(where + ": unknown field '" + k + "'",
                    "an entry holds exactly dtype, shape and data_offsets");
      }
    }
    TensorInfo t;
    t.name = name;
    auto dt = entry.find("dtype");
    if (dt == entry.end() || !dt->is_string()) {
      throw Error(where + ": dtype is missing or not a string", kFormatHint);
    }
    auto parsed = dtype_from_name(dt->get<std::string>());
    if (!parsed) {
      throw Error(where + ": unknown dtype '" + dt->get<std::string>() + "'",
                  "moerl reads F32, BF16, F16, I64, I32, U8 and BOOL; convert the tensor "
                  "(e.g. tensor.float()) before saving");
    }
    t.dtype = *parsed;
    auto sh = entry.find("shape");
    if (sh == entry.end() || !sh->is_array()) {
      throw Error(where + ": shape is missing or not a list", kFormatHint);
    }
    for (const json& d : *sh) {
      if (!d.is_number_unsigned()) {
        throw Error(where + ": shape " + sh->dump() + " must hold non-negative integers",
                    kFormatHint);
      }
      uint64_t dim = d.get<uint64_t>();
      if (dim > uint64_t(INT64_MAX)) {
        throw Error(where + ": shape dimension " + std::to_string(dim) + " is too large",
                    kFormatHint);
      }
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    auto off = entry.find("data_offsets");
    if (off == entry.end() || !off->is_array() || off->size() != 2 ||
        !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned()) {
      throw Error(where + ": data_offsets must be [begin, end] non-negative integers, got " +
                      (off == entry.end() ? std::string("nothing") : off->dump()),
                  kFormatHint);
    }
    const uint64_t begin = (*off)[0].get<uint64_t>();
    const uint64_t end = (*off)[1].get<uint64_t>();
    if (end < begin) {
      throw Error(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                      "] end before begin",
                  kFormatHint);
    }
    if (end > data_size) {
      throw Error(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                      "] out of range of the data section (" + std::to_string(data_size) +
                      " bytes)",
                  kFormatHint);
    }
    const std::optional<size_t> expect = byte_size(t.shape, dtype_size(t.dtype));
    if (!expect || *expect != end - begin) {
      throw Error(where + ": " + std::string(dtype_name(t.dtype)) + " " + shape_str(t.shape) +
                      " needs " + (expect ? std::to_string(*expect) : std::string("too many")) +
                      " bytes but data_offsets span " + std::to_string(end - begin),
                  kFormatHint);
    }
    t.offset = static_cast<size_t>(begin);
    t.nbytes = static_cast<size_t>(end - begin);
    t.data = data + t.offset;
    names_.push_back(name);
    tensors_.emplace(name, std::move(t));
  }

  // Overlap: sort non-empty ranges by begin; each must start at or after the previous end.
  std::vector<const TensorInfo*> by_offset;
  for (const auto& [name, t] : tensors_) {
    if (t.nbytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->name < b->name;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo* prev = by_offset[i - 1];
    const TensorInfo* cur = by_offset[i];
    if (cur->offset < prev->offset + prev->nbytes) {
      throw Error(src + ": tensor '" + cur->name + "' (bytes " + std::to_string(cur->offset) +
                      ".." + std::to_string(cur->offset + cur->nbytes) + ") overlaps tensor '" +
                      prev->name + "' (bytes " + std::to_string(prev->offset) + ".." +
                      std::to_string(prev->offset + prev->nbytes) + ")",
                  kFormatHint);
    }
  }
  std::sort(names_.begin(), names_.end());
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    std::string some;
    for (size_t i = 0; i < names_.size() && i < 5; ++i) some += (i ? ", " : "") + names_[i];
    throw Error(source_name_ + ": no tensor named '" + name + "' (" +
                    std::to_string(names_.size()) + " tensors" +
                    (some.empty() ? "" : ", e.g. " + some) + ")",
                "check the tensor name and that this is the right checkpoint",
                ErrorCode::kNotFound);
  }
  return it->second;
}

}  // namespace moerl::io
