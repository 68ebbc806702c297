// The architectures moerl knows. Adding one: a new file in model/archs/ defining
// `const Arch& <name>_arch()`, and one line in kArchs below.
#include "base/error.h"
#include "model/archs/arch.h"

namespace moerl::model {

const Arch& qwen3_moe_arch();
const Arch& mixtral_arch();
const Arch& qwen2_moe_arch();
const Arch& deepseek_v3_arch();

namespace {
struct Entry {
  const char* model_type;
  const Arch& (*get)();
};
const Entry kArchs[] = {
    {"qwen3_moe", qwen3_moe_arch},
    {"mixtral", mixtral_arch},
    {"qwen2_moe", qwen2_moe_arch},
    {"deepseek_v3", deepseek_v3_arch},
};
}  // namespace

std::vector<std::string> known_architectures() {
  std::vector<std::string> out;
  for (const Entry& e : kArchs) out.push_back(e.model_type);
  return out;
}

const Arch& find_arch(const std::string& model_type) {
  for (const Entry& e : kArchs) {
    if (model_type == e.model_type) return e.get();
  }
  std::string known;
  for (const Entry& e : kArchs) known += std::string(known.empty() ? "" : ", ") + e.model_type;
  throw Error("unknown architecture model_type=\"" + model_type + "\" (moerl knows: " + known + ")",
              "use a checkpoint of one of these architectures, or add a file in src/model/archs/");
}

}  // namespace moerl::model
