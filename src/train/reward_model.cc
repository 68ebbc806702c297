#include "train/reward_model.h"

#include <filesystem>
#include <mutex>

#include "base/error.h"
#include "io/tensor_io.h"
#include "tasks/reward_fn.h"

namespace moerl::train {

ValueScorer::ValueScorer(const std::string& model_dir) {
  std::filesystem::path head = std::filesystem::path(model_dir) / kValueHeadFile;
  if (!std::filesystem::exists(head)) {
    throw Error("reward model " + model_dir + " has no " + kValueHeadFile,
                "use the final_model of a PPO run (algorithm = \"ppo\"), which saves its critic head",
                ErrorCode::kNotFound);
  }
  model_ = std::make_shared<model::Model>(model::load_model(model_dir));
  tok_ = model::load_tokenizer(model_dir);
  auto t = io::load_tensors(head.string());
  int64_t H = model_->config().hidden_size;
  w_1H_ = io::require_tensor(t, "value_head.weight", {1, H}).to(at::kFloat);
  b_1 = io::require_tensor(t, "value_head.bias", {1}).to(at::kFloat);
}

std::vector<double> ValueScorer::score(const std::vector<std::string>& texts) {
  at::NoGradGuard no_grad;
  std::vector<std::vector<int64_t>> ids;
  int64_t T = 1;
  for (const auto& s : texts) {
    ids.push_back(tok_->encode(s, /*add_bos=*/true));
    T = std::max<int64_t>(T, static_cast<int64_t>(ids.back().size()));
  }
  int64_t B = static_cast<int64_t>(texts.size());
  if (B == 0) return {};
  at::Tensor input = at::full({B, T}, tok_->pad_id(), at::kLong);
  at::Tensor mask = at::zeros({B, T}, at::kLong);
  std::vector<int64_t> last(B);
  for (int64_t b = 0; b < B; ++b) {
    for (size_t t = 0; t < ids[b].size(); ++t) {
      input[b][t] = ids[b][t];
      mask[b][t] = 1;
    }
    last[b] = static_cast<int64_t>(ids[b].size()) - 1;
  }
  model::ForwardOutput out = model_->forward({.input_ids = input, .attention_mask = mask});
  at::Tensor idx = at::tensor(last, at::kLong);
  at::Tensor h_BH = out.hidden_BTH.index_select(1, idx).diagonal(0, 0, 1).t().to(at::kFloat);
  at::Tensor v = (at::matmul(h_BH, w_1H_.t()).squeeze(-1) + b_1).contiguous();
  return std::vector<double>(v.data_ptr<float>(), v.data_ptr<float>() + B);
}

void register_model_reward() {
  static std::once_flag once;
  std::call_once(once, [] {
    tasks::register_reward_fn("model", [](ConfigTable& t, std::shared_ptr<const tasks::Task>) {
      std::string dir = t.required_string("reward_model");
      tasks::Squash squash = t.choice("reward_squash", "sigmoid", {"sigmoid", "none"}) == "sigmoid"
                                 ? tasks::Squash::kSigmoid
                                 : tasks::Squash::kNone;
      auto scorer = std::make_shared<ValueScorer>(dir);
      return std::make_unique<tasks::TextScorerRewardFn>(
          "model:" + dir, [scorer](const std::vector<std::string>& texts) { return scorer->score(texts); },
          squash);
    });
  });
}

}  // namespace moerl::train
