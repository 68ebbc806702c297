// `moerl convert`: read a checkpoint in any layout moerl loads (the per-expert hub layout,
// transformers 5's fused in-memory experts, sharded indexes) and write it the way moerl saves
// models: config.json + model.safetensors, Hugging Face names, per-expert hub layout.
//   moerl convert --model DIR --output DIR [--max-shard-bytes N]
// What it writes is what Model::save writes (so tests/fixtures/check_hf_loadback.py can check
// that transformers reads moerl's files back).
#include "cli/command.h"
#include "model/model.h"

namespace moerl::cli {

static int run_convert(Args& args) {
  const std::string model_dir = args.required("--model");
  const std::string output = args.required("--output");
  const int64_t max_shard = args.integer("--max-shard-bytes", 0);
  args.finish();
  model::load_model(model_dir).save(output, max_shard);
  return 0;
}

MOERL_COMMAND("convert", "re-save a checkpoint as moerl saves it (HF names, per-expert hub layout)", run_convert);

}  // namespace moerl::cli
