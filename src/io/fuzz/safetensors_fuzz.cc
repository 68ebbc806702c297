// libFuzzer target: SafetensorsFile::parse on arbitrary bytes. A moerl::Error is the
// expected outcome for bad input; any other exception, crash or sanitizer report is a bug.
// Built only with -DMOERL_FUZZ=ON (scripts/fuzz.sh).

#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    moerl::io::SafetensorsFile f = moerl::io::SafetensorsFile::parse(data, size, "fuzz-input");
    // Touch every byte the parser vouched for: ASan flags any range outside the input.
    uint64_t sum = 0;
    for (const std::string& name : f.names()) {
      const moerl::io::TensorInfo& t = f.info(name);
      for (size_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
      if (t.nbytes != static_cast<size_t>(t.numel()) * moerl::io::dtype_size(t.dtype)) __builtin_trap();
    }
    for (const auto& [k, v] : f.metadata()) sum += k.size() + v.size();
    volatile uint64_t sink = sum;
    (void)sink;
  } catch (const moerl::Error&) {
  }
  return 0;
}
