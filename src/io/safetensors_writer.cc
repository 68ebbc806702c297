// safetensors writer: tensors laid out largest element first (each at a multiple of its
// element size), the header padded to 8 bytes, the file written all or nothing (AtomicFile).
// No libtorch here: this file is also built under libFuzzer + ASan + UBSan.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/files.h"
#include "io/safetensors.h"
#include "io/safetensors_shape.h"

namespace moerl::io {

using detail::byte_size;
using detail::shape_str;
using nlohmann::json;

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const void* data, size_t nbytes) {
  if (name.empty() || name == "__metadata__") {
    throw Error("safetensors writer: tensor name '" + name + "' is reserved or empty",
                "rename the tensor");
  }
  if (index_.count(name) != 0) {
    throw Error("safetensors writer: tensor '" + name + "' added twice",
                "each tensor name may appear once per file");
  }
  const std::optional<size_t> expect = byte_size(shape, dtype_size(dtype));
  if (!expect || *expect != nbytes) {
    throw Error("safetensors writer: tensor '" + name + "' " + dtype_name(dtype) + " " +
                    shape_str(shape) + " needs " +
                    (expect ? std::to_string(*expect) : std::string("too many")) +
                    " bytes, got " + std::to_string(nbytes),
                "pass a contiguous buffer of numel * element size bytes");
  }
  if (nbytes > 0 && data == nullptr) {
    throw Error("safetensors writer: tensor '" + name + "' has no data pointer",
                "pass the tensor's data");
  }
  index_[name] = entries_.size();
  entries_.push_back({name, dtype, std::move(shape), data, nbytes});
  data_bytes_ += nbytes;
}

void SafetensorsWriter::write(const std::string& path,
                              const std::map<std::string, std::string>& metadata) const {
  // Layout: larger elements first, then by name, so every tensor starts at a multiple of its
  // element size (the data section itself starts 8-aligned).
  std::vector<const Entry*> order;
  for (const Entry& e : entries_) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    size_t sa = dtype_size(a->dtype), sb = dtype_size(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const Entry* e : order) {
    header[e->name] = {{"dtype", dtype_name(e->dtype)},
                       {"shape", e->shape},
                       {"data_offsets", {offset, offset + e->nbytes}}};
    offset += e->nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    throw Error("safetensors writer: cannot encode the header for '" + path + "' (" + e.what() + ")",
                "tensor names and metadata must be valid UTF-8");
  }
  // Pad with spaces so the data section starts at a multiple of 8 (as the reference writer).
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(uint64_t(text.size()) >> (8 * i));

  AtomicFile out(path);
  out.write(len, 8);
  out.write(text);
  for (const Entry* e : order) out.write(e->data, e->nbytes);
  out.commit();
}

}  // namespace moerl::io
