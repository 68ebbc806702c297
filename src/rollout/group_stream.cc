// GroupRollout::stream: one streaming generate() call (model::GenerateStream) fed with task
// units as rows free up; a unit's record is scored and handed to the source as its last
// sample ends. Units whose prompt does not fit the call's rows wait for the next call, which
// makes room for them.
#include <algorithm>
#include <map>
#include <span>

#include "base/check.h"
#include "base/deadline.h"
#include "base/seed.h"
#include "rollout/group_rollout.h"
#include "runtime/weight_registry.h"

namespace moerl::rollout {

class GroupStreamState final : public model::GenerateStream {
 public:
  GroupStreamState(GroupRollout& r, UnitSource& source) : r_(r), source_(source) {}

  // The prompts of the next call's first units (held ones first), or none when there is no
  // work. Each call numbers its sequences from 0.
  std::vector<std::vector<int64_t>> start(int64_t rows) {
    next_ = 0;
    std::vector<runtime::TaskUnit> units = std::move(held_);
    held_.clear();
    if (units.empty()) units = source_.take(units_for(rows), /*idle=*/true);
    std::vector<std::vector<int64_t>> prompts;
    for (runtime::TaskUnit& u : units) {
      std::vector<int64_t> p = r_.prompt_of(u);
      r_.room_ = std::max(r_.room_, static_cast<int64_t>(p.size()));
      add(std::move(u), std::move(p), &prompts);
    }
    return prompts;
  }
  bool holding() const { return !held_.empty(); }
  bool in_flight() const { return !open_.empty(); }

  model::StreamFeed feed(int64_t free_rows, int64_t prompt_room) override {
    model::StreamFeed f;
    f.weights_tag = source_.refresh();
    if (free_rows <= 0 || !held_.empty()) return f;  // held: let this call drain, the next has room
    for (runtime::TaskUnit& u : source_.take(units_for(free_rows), /*idle=*/false)) {
      std::vector<int64_t> p = r_.prompt_of(u);
      if (static_cast<int64_t>(p.size()) > prompt_room || !held_.empty()) {
        r_.room_ = std::max(r_.room_, static_cast<int64_t>(p.size()));  // the next call makes room
        held_.push_back(std::move(u));
        continue;
      }
      add(std::move(u), std::move(p), &f.prompts);
    }
    return f;
  }

  void finished(int64_t index, model::Generation g) override {
    auto it = std::prev(open_.upper_bound(index));
    Open& o = it->second;
    MOERL_CHECK(index >= it->first && index < it->first + static_cast<int64_t>(o.gens.size()));
    o.gens[index - it->first] = std::move(g);
    if (--o.left > 0) return;
    const double t0 = now_seconds();
    const std::vector<double> rewards = r_.score(std::span(&o.unit, 1), o.gens);
    const double t1 = now_seconds();
    // The stream's generating time since the previous record: records' shares add up to it.
    runtime::ExperienceRecord rec = r_.record(o.unit, o.prompt, o.gens, rewards.data(), t0 - last_, t1 - t0);
    last_ = t1;
    rec.leased_unix_ms = o.started_ms;
    open_.erase(it);
    source_.done(std::move(rec));
  }

 private:
  struct Open {
    runtime::TaskUnit unit;
    std::vector<int64_t> prompt;
    std::vector<model::Generation> gens;
    int64_t left = 0;
    int64_t started_ms = 0;
  };

  int64_t units_for(int64_t rows) const {
    const int64_t g = std::max<int64_t>(1, group_);
    return std::max<int64_t>(1, (rows + g - 1) / g);
  }

  void add(runtime::TaskUnit u, std::vector<int64_t> p, std::vector<std::vector<int64_t>>* prompts) {
    const int64_t g = std::max<uint32_t>(1, u.group_size);
    group_ = g;
    for (int64_t i = 0; i < g; ++i) prompts->push_back(p);
    Open& o = open_[next_];
    o.gens.resize(g);
    o.left = g;
    o.started_ms = runtime::unix_ms_now();
    o.prompt = std::move(p);
    o.unit = std::move(u);
    next_ += g;
  }

  GroupRollout& r_;
  UnitSource& source_;
  std::map<int64_t, Open> open_;  // first sequence index -> unit in flight
  std::vector<runtime::TaskUnit> held_;
  int64_t next_ = 0;   // next sequence index of this call
  int64_t group_ = 1;  // the latest unit's group size: units asked for per free row
  double last_ = now_seconds();
};

bool GroupRollout::stream(UnitSource& source, uint64_t seed, std::function<bool()> cancel) {
  if (cfg_.batch_rows <= 0) {
    throw Error("a streaming rollout needs [rollout] batch_rows > 0 (the rows kept decoding)",
                "set rollout.batch_rows, e.g. to the rows of one step's samples");
  }
  GroupStreamState state(*this, source);
  bool any = false;
  for (uint64_t call = 0;; ++call) {
    std::vector<std::vector<int64_t>> prompts = state.start(cfg_.batch_rows);
    if (prompts.empty()) break;
    any = true;
    model::GenerateConfig gc = generate_config(mix_seed(seed, call, 0), source.version(), cancel);
    gc.stream = &state;
    gc.prompt_room = room_;  // the longest prompt seen, held ones included
    model::generate(policy_, prompts, gc);
    MOERL_CHECK(!state.in_flight()) << "a streaming generate() returned with units in flight";
    if (!state.holding()) break;
  }
  return any;
}

}  // namespace moerl::rollout
