// libFuzzer target: HfConfig::parse on arbitrary text. Bad input must be a moerl::Error;
// a config that parses must survive to_json -> parse unchanged (the save path).
// Built only with -DMOERL_FUZZ=ON (scripts/fuzz.sh).

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "io/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using moerl::io::HfConfig;
  HfConfig c;
  try {
    c = HfConfig::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz-config");
  } catch (const moerl::Error&) {
    return 0;
  }
  for (int64_t i = 0; i < c.num_hidden_layers && i < 64; ++i) (void)c.is_moe_layer(i);
  const std::string once = c.to_json();
  // NOTE: not caught: a saved config that fails to parse back is a bug.
  const std::string twice = HfConfig::parse(once, "fuzz-config-resaved").to_json();
  if (once != twice) __builtin_trap();
  return 0;
}
