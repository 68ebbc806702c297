// `moerl generate`: continue a batch of prompts with a checkpoint.
//   moerl generate --model DIR --input IN.safetensors --max-new-tokens N
//                  (--greedy | --temperature X [--top-p P] [--top-k K] [--seed S])
//                  [--ignore-eos] [--ep-size N [--ep-backend fabric|alltoall]]
//                  [--device cpu|cuda[:N]] [--dtype float32|bfloat16] --output OUT.safetensors
// IN: int64 `input_ids` [B,T] (every token real). OUT: int64 `output_ids` [B,T+N], the
// prompt then the new tokens; a row that stops at EOS (config eos_token_id) keeps its EOS and
// is padded with pad_token_id (eos_token_id if the config has no pad), as transformers does.
// --ep-size N (under `moerl launch -n N`): experts sharded over N ranks; rank r generates
// rows r, r+N, ... (every rank all rows when B < N) in lockstep; rank 0 writes OUT.
// --device cuda runs the model on the GPU with the CUDA-graph decode (cli/device_flags.h).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/error.h"
#include "cli/command.h"
#include "cli/device_flags.h"
#include "io/tensor_io.h"
#include "model/generate.h"
#include "train/dp_sync.h"

namespace moerl::cli {

at::Tensor read_input_ids_file(const std::string& path);  // cmd_forward.cc

static int run_generate(Args& args) {
  const std::string model_dir = args.required("--model");
  const std::string input = args.required("--input");
  const std::string output = args.required("--output");
  const int64_t max_new = args.integer("--max-new-tokens", -1);
  const bool greedy = args.flag("--greedy");
  const auto temperature = args.value("--temperature");
  const auto top_p = args.value("--top-p");
  const auto top_k = args.value("--top-k");
  const int64_t seed = args.integer("--seed", 0);
  const bool ignore_eos = args.flag("--ignore-eos");
  const int64_t ep_size = args.integer("--ep-size", 1);
  const std::string ep_backend = args.value("--ep-backend").value_or("fabric");
  model::ModelOptions mo = model_flags(args, "generate");
  args.finish();
  if (max_new < 0) {
    throw Error("generate needs --max-new-tokens N (N >= 0)", "e.g. --max-new-tokens 16");
  }
  if (greedy == temperature.has_value()) {
    throw Error("generate needs exactly one of --greedy and --temperature X",
                "use --greedy for argmax decoding or --temperature 1.0 to sample");
  }
  if (greedy && (top_p || top_k)) {
    throw Error("--top-p/--top-k apply to sampling, not to --greedy", "drop them or use --temperature");
  }
  model::GenerateConfig g;
  g.max_new_tokens = max_new;
  g.seed = static_cast<uint64_t>(seed);
  g.sampling.greedy = greedy;
  auto number = [](const std::string& flag, const std::string& v) {
    try {
      size_t used = 0;
      double d = std::stod(v, &used);
      if (used == v.size()) return d;
    } catch (const std::exception&) {
    }
    throw Error(flag + " expects a number, got \"" + v + "\"", "e.g. " + flag + " 0.9");
  };
  if (temperature) g.sampling.temperature = number("--temperature", *temperature);
  if (top_p) g.sampling.top_p = number("--top-p", *top_p);
  if (top_k) g.sampling.top_k = static_cast<int64_t>(number("--top-k", *top_k));

  at::Tensor ids = read_input_ids_file(input);
  const int64_t B = ids.size(0), T = ids.size(1);
  std::shared_ptr<train::DataParallel> dp;
  std::vector<int64_t> rows;  // the input rows this rank generates
  for (int64_t b = 0; b < B; ++b) rows.push_back(b);
  if (ep_size != 1) {
    const env::Rendezvous rdv = env::rendezvous();
    if (ep_size < 1 || rdv.world_size != ep_size) {
      throw Error("generate: --ep-size " + std::to_string(ep_size) + " needs that many ranks but WORLD_SIZE=" +
                      std::to_string(rdv.world_size),
                  "run it as: moerl launch -n " + std::to_string(std::max<int64_t>(1, ep_size)) + " -- moerl generate ...");
    }
    const io::HfConfig arch = io::HfConfig::load((std::filesystem::path(model_dir) / "config.json").string());
    if (B >= ep_size) {
      rows.clear();
      for (int64_t b = rdv.rank; b < B; b += ep_size) rows.push_back(b);
    }
    ep::Config ec;
    ec.backend = ep::parse_backend(ep_backend);
    ec.hidden = arch.hidden_size;
    ec.max_topk = arch.num_experts_per_tok;
    ec.max_tokens_per_rank = std::max<int64_t>(1, static_cast<int64_t>(rows.size()) * (T + max_new));
    mo.ep_group = ep::make_group(ec, arch.num_experts);
    dp = train::DataParallel::join(ec.timeout_s);
    g.all_done = dp->all_done_fn();
  }
  model::Model m = model::load_model(model_dir, mo);
  const auto& cfg = m.config();
  if (!ignore_eos && cfg.eos_token_id >= 0) g.eos_ids = {cfg.eos_token_id};
  g.pad_id = cfg.pad_token_id >= 0 ? cfg.pad_token_id : (cfg.eos_token_id >= 0 ? cfg.eos_token_id : 0);

  std::vector<std::vector<int64_t>> prompts;
  for (int64_t b : rows) {
    const int64_t* p = ids[b].contiguous().data_ptr<int64_t>();
    prompts.emplace_back(p, p + T);
  }
  std::vector<model::Generation> gens = model::generate(m, prompts, g);
  std::vector<std::vector<int64_t>> new_tokens(B);
  for (size_t i = 0; i < rows.size(); ++i) new_tokens[rows[i]] = gens[i].tokens;
  if (dp) {  // rank 0 collects every rank's rows
    nlohmann::json mine = nlohmann::json::object();
    for (size_t i = 0; i < rows.size(); ++i) mine[std::to_string(rows[i])] = gens[i].tokens;
    for (const std::string& part : dp->gather(mine.dump())) {
      const nlohmann::json j = nlohmann::json::parse(part);  // outlives the items() proxy
      for (const auto& el : j.items()) {
        new_tokens[std::stoll(el.key())] = el.value().get<std::vector<int64_t>>();
      }
    }
    if (dp->rank() != 0) return 0;
  }
  at::Tensor out = at::full({B, T + max_new}, g.pad_id, at::kLong);
  out.narrow(1, 0, T).copy_(ids);
  for (int64_t b = 0; b < B; ++b) {
    int64_t* row = out[b].data_ptr<int64_t>();
    for (size_t i = 0; i < new_tokens[b].size(); ++i) row[T + i] = new_tokens[b][i];
  }
  io::save_tensors(output, {{"output_ids", out}});
  return 0;
}

MOERL_COMMAND("generate", "continue token-id prompts with a model (greedy or sampled)", run_generate);

}  // namespace moerl::cli
