// `moerl init`: a random-weight checkpoint of a model geometry, sized to a tokenizer, for
// smoke tests and plumbing runs (what transformers' from_config + save_pretrained gives).
//   moerl init --config CONFIG.json --tokenizer DIR --output DIR [--seed S]
// CONFIG.json is a Hugging Face config.json (any architecture moerl loads); DIR holds the
// tokenizer files (tokenizer.json, tokenizer_config.json, generation_config.json, or
// moerl_tokenizer.json). The output directory is a model directory `moerl train` can start
// from ([model] init = "DIR"): config.json, model.safetensors (N(0, 0.02) weights, float32)
// and the tokenizer files. The config's vocab_size must cover every token id (a model
// cannot emit ids it has no row for); BOS/EOS/pad ids come from the tokenizer.
#include <cstdio>

#include "base/error.h"
#include "cli/command.h"
#include "io/hf_config.h"
#include "model/model.h"
#include "model/tokenizer.h"

namespace moerl::cli {

static int run_init(Args& args) {
  const std::string config = args.required("--config");
  const std::string tokenizer_dir = args.required("--tokenizer");
  const std::string output = args.required("--output");
  const uint64_t seed = static_cast<uint64_t>(args.integer("--seed", 0));
  args.finish();
  io::HfConfig c = io::HfConfig::load(config);
  std::unique_ptr<model::Tokenizer> tok = model::load_tokenizer(tokenizer_dir);
  if (c.vocab_size < tok->vocab_size()) {
    throw Error("init: " + config + " has vocab_size " + std::to_string(c.vocab_size) + " but the tokenizer in " +
                    tokenizer_dir + " has ids up to " + std::to_string(tok->vocab_size() - 1),
                "set vocab_size to at least " + std::to_string(tok->vocab_size()) +
                    " (real checkpoints pad it, e.g. 151936 for Qwen3's 151669 ids)");
  }
  c.bos_token_id = tok->bos_id();
  c.eos_token_id = tok->eos_id();
  c.pad_token_id = tok->pad_id();
  c.validate(config);
  model::Model m = model::init_random(c, seed);
  m.save(output);
  tok->save(output);
  std::fprintf(stderr, "init: %lld parameters (vocabulary %lld) -> %s\n", static_cast<long long>(m.num_parameters()),
               static_cast<long long>(c.vocab_size), output.c_str());
  return 0;
}

MOERL_COMMAND("init", "write a random-weight checkpoint of a config.json geometry with a tokenizer's files", run_init);

}  // namespace moerl::cli
