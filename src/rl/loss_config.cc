// LossConfig validation and the [algorithm] section reader.
#include "rl/loss_config.h"

#include <sstream>
#include <vector>

#include "base/error.h"

namespace moerl::rl {

const char* name_of(Algorithm v) { return v == Algorithm::kPpo ? "ppo" : "grpo"; }

const char* name_of(AdvEstimator v) {
  switch (v) {
    case AdvEstimator::kGrpo: return "grpo";
    case AdvEstimator::kDrGrpo: return "dr_grpo";
    case AdvEstimator::kRloo: return "rloo";
    case AdvEstimator::kGae: return "gae";
  }
  return "?";
}

const char* name_of(LossAgg v) {
  switch (v) {
    case LossAgg::kTokenMean: return "token-mean";
    case LossAgg::kSeqMeanTokenMean: return "seq-mean-token-mean";
    case LossAgg::kSeqMeanTokenSumNorm: return "seq-mean-token-sum-norm";
  }
  return "?";
}

const char* name_of(KlEstimator v) {
  switch (v) {
    case KlEstimator::kK1: return "k1";
    case KlEstimator::kK2: return "k2";
    case KlEstimator::kK3: return "k3";
    case KlEstimator::kK3Plus: return "k3+";
  }
  return "?";
}

const char* name_of(KlPlacement v) { return v == KlPlacement::kReward ? "reward" : "loss"; }

const char* name_of(BehaviourCorrection v) {
  switch (v) {
    case BehaviourCorrection::kNone: return "none";
    case BehaviourCorrection::kTis: return "tis";
    case BehaviourCorrection::kDecoupled: return "decoupled";
    case BehaviourCorrection::kMis: return "mis";
  }
  return "?";
}

const char* name_of(MisLevel v) { return v == MisLevel::kSequence ? "sequence" : "token"; }
const char* name_of(RatioLevel v) { return v == RatioLevel::kSequence ? "sequence" : "token"; }
const char* name_of(RoutingReplay v) { return v == RoutingReplay::kRollout ? "rollout" : "off"; }

namespace {

[[noreturn]] void bad(const std::string& what, const std::string& hint) {
  throw Error("config: algorithm: " + what, hint);
}

template <typename E>
E parse_enum(ConfigTable& t, const std::string& key, E fallback, const std::vector<E>& values) {
  std::vector<std::string> names;
  for (E v : values) names.emplace_back(name_of(v));
  std::string got = t.choice(key, name_of(fallback), names);
  for (E v : values) {
    if (got == name_of(v)) return v;
  }
  return fallback;  // unreachable: choice() rejects anything else
}

}  // namespace

void LossConfig::validate() const {
  std::ostringstream os;
  bool ppo = algorithm == Algorithm::kPpo;
  if (ppo != (adv_estimator == AdvEstimator::kGae)) {
    os << "algorithm = \"" << name_of(algorithm) << "\" cannot use adv_estimator = \""
       << name_of(adv_estimator) << "\"";
    bad(os.str(), "ppo trains a critic and uses adv_estimator = \"gae\"; grpo uses \"grpo\", "
                  "\"dr_grpo\" or \"rloo\"");
  }
  if (group_size < 1 || (!ppo && group_size < 2)) {
    os << "group_size = " << group_size << " is too small for algorithm = \"" << name_of(algorithm)
       << "\"";
    bad(os.str(), "group-relative advantages need group_size >= 2 (e.g. 8); ppo needs >= 1");
  }
  if (!(eps_low > 0 && eps_low < 1) || !(eps_high > 0 && eps_high <= 10)) {
    os << "eps_low = " << eps_low << ", eps_high = " << eps_high << " out of range";
    bad(os.str(), "use 0 < eps_low < 1 and 0 < eps_high <= 10 (DAPO: 0.2 and 0.28)");
  }
  if (dual_clip != 0 && !(dual_clip > 1)) {
    os << "dual_clip = " << dual_clip << " must be 0 (off) or > 1";
    bad(os.str(), "the usual value is 3");
  }
  if (!(adv_eps > 0)) {
    os << "adv_eps = " << adv_eps << " must be > 0";
    bad(os.str(), "use 1e-6");
  }
  if (kl_coef < 0 || entropy_coef < 0 || aux_loss_coef < 0 || z_loss_coef < 0 || value_coef < 0) {
    os << "coefficients must be >= 0 (kl_coef = " << kl_coef << ", entropy_coef = " << entropy_coef
       << ", aux_loss_coef = " << aux_loss_coef << ", z_loss_coef = " << z_loss_coef
       << ", value_coef = " << value_coef << ")";
    bad(os.str(), "a term is switched off with coefficient 0");
  }
  if (behaviour_correction != BehaviourCorrection::kNone && !(tis_cap >= 1)) {
    os << "tis_cap = " << tis_cap << " must be >= 1 with behaviour_correction = \""
       << name_of(behaviour_correction) << "\"";
    bad(os.str(), "a cap below 1 would also down-weight fresh samples; typical values are 2 to 5");
  }
  if (kl_coef > 0 && kl_in == KlPlacement::kLoss && kl_estimator == KlEstimator::kK1) {
    bad("kl_estimator = \"k1\" with kl_in = \"loss\" has zero expected gradient (E[grad log pi] = 0): "
        "the penalty would not pull the policy towards the reference",
        "use kl_estimator = \"k3+\" (value of k3, gradient of k2) or \"k2\" in the loss, or put k1 in the "
        "reward (kl_in = \"reward\")");
  }
  if (behaviour_correction == BehaviourCorrection::kMis && !(mis_lower >= 0 && mis_lower <= 1 && mis_upper >= 1)) {
    os << "mis_lower = " << mis_lower << ", mis_upper = " << mis_upper << " must satisfy 0 <= lower <= 1 <= upper";
    bad(os.str(), "a band that excludes ratio 1 would mask fresh samples; typical: 0.5 and 2");
  }
  if (overlong_buffer < 0) {
    os << "overlong_buffer = " << overlong_buffer << " must be >= 0";
    bad(os.str(), "0 disables the soft overlong penalty; DAPO uses a quarter of the length budget");
  }
  if (!(gamma >= 0 && gamma <= 1) || !(lambda >= 0 && lambda <= 1)) {
    os << "gamma = " << gamma << ", lambda = " << lambda << " must lie in [0, 1]";
    bad(os.str(), "outcome-reward PPO commonly uses gamma = 1, lambda = 1 (or 0.95)");
  }
  if (value_clip < 0) {
    os << "value_clip = " << value_clip << " must be >= 0";
    bad(os.str(), "0 disables value clipping; 0.2 is common");
  }
  if (ppo && value_coef == 0) {
    bad("value_coef = 0 with algorithm = \"ppo\" would never train the critic",
        "set value_coef > 0 (e.g. 0.5)");
  }
}

LossConfig read_loss_config(ConfigTable& t) {
  LossConfig c;
  c.algorithm = parse_enum(t, "algorithm", Algorithm::kGrpo, {Algorithm::kGrpo, Algorithm::kPpo});
  bool ppo = c.algorithm == Algorithm::kPpo;
  c.group_size = t.integer("group_size", ppo ? 1 : 8, {.min = 1, .max = 4096});
  c.adv_estimator = parse_enum(t, "adv_estimator", ppo ? AdvEstimator::kGae : AdvEstimator::kGrpo,
                               {AdvEstimator::kGrpo, AdvEstimator::kDrGrpo, AdvEstimator::kRloo,
                                AdvEstimator::kGae});
  c.adv_eps = t.number("adv_eps", c.adv_eps, {.min = 0, .max = 1});
  c.whiten_advantages = t.boolean("whiten_advantages", c.whiten_advantages);
  c.eps_low = t.number("eps_low", c.eps_low, {.min = 0, .max = 1});
  c.eps_high = t.number("eps_high", c.eps_high, {.min = 0, .max = 10});
  c.dual_clip = t.number("dual_clip", c.dual_clip, {.min = 0, .max = 1e6});
  c.ratio_level = parse_enum(t, "ratio_level", c.ratio_level, {RatioLevel::kToken, RatioLevel::kSequence});
  // GSPO averages over sequences: its default aggregation is seq-mean-token-mean.
  if (c.ratio_level == RatioLevel::kSequence) c.loss_agg = LossAgg::kSeqMeanTokenMean;
  c.loss_agg = parse_enum(t, "loss_agg", c.loss_agg,
                          {LossAgg::kTokenMean, LossAgg::kSeqMeanTokenMean, LossAgg::kSeqMeanTokenSumNorm});
  c.kl_coef = t.number("kl_coef", c.kl_coef, {.min = 0, .max = 1e3});
  c.kl_estimator = parse_enum(t, "kl_estimator", c.kl_estimator,
                              {KlEstimator::kK1, KlEstimator::kK2, KlEstimator::kK3, KlEstimator::kK3Plus});
  c.kl_in = parse_enum(t, "kl_in", c.kl_in, {KlPlacement::kLoss, KlPlacement::kReward});
  c.entropy_coef = t.number("entropy_coef", c.entropy_coef, {.min = 0, .max = 1e3});
  c.aux_loss_coef = t.number("aux_loss_coef", c.aux_loss_coef, {.min = 0, .max = 1e3});
  c.z_loss_coef = t.number("z_loss_coef", c.z_loss_coef, {.min = 0, .max = 1e3});
  c.behaviour_correction = parse_enum(
      t, "behaviour_correction", c.behaviour_correction,
      {BehaviourCorrection::kNone, BehaviourCorrection::kTis, BehaviourCorrection::kDecoupled,
       BehaviourCorrection::kMis});
  c.tis_cap = t.number("tis_cap", c.tis_cap, {.min = 0, .max = 1e6});
  c.mis_lower = t.number("mis_lower", c.mis_lower, {.min = 0, .max = 1});
  c.mis_upper = t.number("mis_upper", c.mis_upper, {.min = 1, .max = 1e6});
  c.mis_level = parse_enum(t, "mis_level", c.mis_level, {MisLevel::kToken, MisLevel::kSequence});
  c.overlong_buffer = t.integer("overlong_buffer", c.overlong_buffer, {.min = 0, .max = 1e7});
  c.routing_replay = parse_enum(t, "routing_replay", c.routing_replay, {RoutingReplay::kOff, RoutingReplay::kRollout});
  c.gamma = t.number("gamma", c.gamma, {.min = 0, .max = 1});
  c.lambda = t.number("lambda", c.lambda, {.min = 0, .max = 1});
  c.value_clip = t.number("value_clip", c.value_clip, {.min = 0, .max = 1e6});
  c.value_coef = t.number("value_coef", c.value_coef, {.min = 0, .max = 1e3});
  c.validate();
  return c;
}

}  // namespace moerl::rl
