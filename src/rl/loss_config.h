// LossConfig: every option of the RL objective (advantage estimator, clipping, loss
// aggregation, KL, entropy, MoE auxiliary losses, behaviour-policy correction, critic),
// validated in one place and read from the [algorithm] section of a job config.
// docs/rl.md gives the formula each option selects.
//
//   ConfigDoc doc = ConfigDoc::load("job.toml");
//   ConfigTable algo = doc.root().table("algorithm");
//   LossConfig cfg = read_loss_config(algo);   // validates; throws moerl::Error naming the key
//   algo.done();                                // the caller rejects unknown keys
// Plain value type; no shared state.
#pragma once

#include <cstdint>
#include <string>

#include "base/config.h"

namespace moerl::rl {

enum class Algorithm { kGrpo, kPpo };
enum class AdvEstimator { kGrpo, kDrGrpo, kRloo, kGae };
enum class LossAgg { kTokenMean, kSeqMeanTokenMean, kSeqMeanTokenSumNorm };
enum class KlEstimator { kK1, kK2, kK3, kK3Plus };
enum class KlPlacement { kLoss, kReward };
enum class BehaviourCorrection { kNone, kTis, kDecoupled, kMis };
enum class MisLevel { kToken, kSequence };
enum class RatioLevel { kToken, kSequence };  // sequence = GSPO
enum class RoutingReplay { kOff, kRollout };  // R3: replay the rollout's expert selection

struct LossConfig {
  Algorithm algorithm = Algorithm::kGrpo;
  int64_t group_size = 8;            // responses per prompt (G)
  AdvEstimator adv_estimator = AdvEstimator::kGrpo;
  double adv_eps = 1e-6;             // GRPO: (r - mean) / (std + adv_eps)
  bool whiten_advantages = true;     // GAE only: batch-normalise advantages
  double eps_low = 0.2;              // ratio clipped to [1 - eps_low, 1 + eps_high]
  double eps_high = 0.2;             // clip-higher (DAPO) when > eps_low
  double dual_clip = 0.0;            // c > 1 enables dual clip for A < 0; 0 disables
  RatioLevel ratio_level = RatioLevel::kToken;  // sequence: GSPO's length-normalised ratio
  LossAgg loss_agg = LossAgg::kTokenMean;
  double kl_coef = 0.0;              // 0 disables the KL term
  KlEstimator kl_estimator = KlEstimator::kK3;
  KlPlacement kl_in = KlPlacement::kLoss;
  double entropy_coef = 0.0;         // loss -= entropy_coef * agg(entropy)
  double aux_loss_coef = 0.01;       // MoE load-balancing loss
  double z_loss_coef = 0.001;        // router z-loss
  BehaviourCorrection behaviour_correction = BehaviourCorrection::kNone;
  double tis_cap = 2.0;              // C: TIS clamp / decoupled filter threshold, >= 1
  double mis_lower = 0.5;            // mis: keep tokens whose pi_old / pi_behav lies in
  double mis_upper = 2.0;            //      [mis_lower, mis_upper], mask the rest
  MisLevel mis_level = MisLevel::kToken;
  int64_t overlong_buffer = 0;       // DAPO soft overlong penalty over the last N tokens; 0 = off
  RoutingReplay routing_replay = RoutingReplay::kOff;
  double gamma = 1.0;                // GAE discount
  double lambda = 1.0;               // GAE lambda
  double value_clip = 0.2;           // eps_v; 0 disables value clipping
  double value_coef = 0.5;           // weight of the value loss in the total loss

  // Throws moerl::Error naming the offending option(s) and their values.
  void validate() const;
  bool uses_critic() const { return adv_estimator == AdvEstimator::kGae; }
};

// Reads the keys listed in docs/rl.md from `table` (normally [algorithm]), applies
// algorithm-dependent defaults (ppo -> gae, grpo -> grpo) and validates. Does not call
// table.done(): the section may hold keys owned by other components.
LossConfig read_loss_config(ConfigTable& table);

// Option names as written in configs ("token-mean", "k3", ...), for logs and errors.
const char* name_of(Algorithm v);
const char* name_of(AdvEstimator v);
const char* name_of(LossAgg v);
const char* name_of(KlEstimator v);
const char* name_of(KlPlacement v);
const char* name_of(BehaviourCorrection v);
const char* name_of(MisLevel v);
const char* name_of(RatioLevel v);
const char* name_of(RoutingReplay v);

}  // namespace moerl::rl
