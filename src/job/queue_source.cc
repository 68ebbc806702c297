#include "job/queue_source.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>

#include "base/error.h"
#include "base/files.h"
#include "base/log.h"
#include "job/queue_ahead.h"
#include "rollout/group_rollout.h"
#include "rollout/worker.h"
#include "io/checksum.h"
#include "runtime/byte_codec.h"
#include "runtime/namespace_reset.h"
#include "runtime/record_check.h"
#include "runtime/worker_id.h"

namespace moerl::job {

namespace {

constexpr double kBatchWaitSeconds = 600;  // then warn and keep waiting while work is queued
// Nothing queued, leased or buffered this long, with tasks still unfinished: no producer.
constexpr double kNoProducerGraceSeconds = 15;
// A trainer group's rank 0 tells the other ranks it is still waiting this often.
constexpr double kBeatSeconds = 5;

std::string from_hex(const std::string& hex) {
  auto val = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw Error("checkpoint: the experience-buffer snapshot is not lowercase hex",
                "the checkpoint is corrupt; remove it to resume from an older one", ErrorCode::kIo);
  };
  if (hex.size() % 2) {
    throw Error("checkpoint: odd-length experience-buffer snapshot", "the checkpoint is corrupt", ErrorCode::kIo);
  }
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(val(hex[2 * i]) * 16 + val(hex[2 * i + 1]));
  return out;
}

// trained.jsonl keeps only tasks trained up to the restored step (later ones are trained again).
void trim_trained_log(const std::string& path, bool resumed, int64_t rl_step) {
  std::string kept;
  if (resumed && std::filesystem::exists(path)) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      try {
        if (nlohmann::json::parse(line).at("step").get<int64_t>() <= rl_step) kept += line + "\n";
      } catch (const std::exception&) {
        // a torn last line from the crash: drop it
      }
    }
  }
  write_file_atomic(path, kept);
}

}  // namespace

QueueSource::QueueSource(RunContext& ctx, QueueSourceOptions options) : ctx_(ctx), o_(std::move(options)) {
  if (!o_.backends.queue || !o_.backends.buffer || !o_.backends.weights) {
    throw Error("trainer: the async job needs a task queue, an experience buffer and a weight registry",
                "open them with runtime::open_backends(cfg.runtime)", ErrorCode::kInvalidInput);
  }
  if (!lead()) return;
  // A trainer that starts has steps to run (a finished run given more, or a restart): the
  // marker of an earlier end would send its workers away. It is written again at the end.
  ctx_.store->remove(rollout::kRunDoneKey);
  trim_trained_log(ctx_.path("trained.jsonl"), ctx_.resumed, ctx_.state.rl_step);
}

void QueueSource::on_lead(const std::string& what, const std::function<void(const ep::ControlGroup::Beat&)>& fn) {
  if (!ctx_.dp) return fn({});
  ctx_.dp->lead_runs(what, [&](const ep::ControlGroup::Beat& beat) {
    fn(beat);
    return std::string();
  });
}

Deadline QueueSource::call_deadline() const {
  return Deadline::after_seconds(ctx_.cfg.runtime.call_timeout_seconds);
}

void QueueSource::check_lease() {
  if (lease_) lease_->check(call_deadline());
}

void QueueSource::reset_namespace() {
  const runtime::RuntimeConfig& rt = ctx_.cfg.runtime;
  if (ctx_.resumed) {
    MOERL_LOG(WARN) << "trainer: --fresh, yet a checkpoint was found and resumed (a [store] uri outside the run "
                    << "dir, which --fresh does not clear): runtime.namespace '" << rt.ns << "' is kept for it";
    return;
  }
  // NOTE: only with --fresh. A plain start without a checkpoint may be a trainer restarted
  // before its first one, which must read the stream again (docs/runtime.md).
  const runtime::NamespaceReset r = runtime::reset_namespace(rt, *lease_, call_deadline());
  std::string names;
  for (const std::string& k : r.removed) names += (names.empty() ? "" : ", ") + k;
  MOERL_LOG(INFO) << "trainer: --fresh: removed " << r.removed.size() << " key(s) of runtime.namespace '" << rt.ns
                  << "' left by an earlier run" << (names.empty() ? "" : " (" + names + ")")
                  << "; kept the trainer lease, the epoch counter and the weight versions";
}

void QueueSource::start_lead() {
  const JobConfig& cfg = ctx_.cfg;
  const int64_t P = cfg.rollout.prompts_per_step;
  const nlohmann::json& extra = ctx_.state.extra;
  const nlohmann::json* saved = extra.contains("source") ? &extra["source"] : nullptr;
  first_cursor_ = saved ? saved->at("first_cursor").get<uint64_t>() : ctx_.state.cursor;
  // One trainer per namespace: wait out a dead predecessor's lease, refuse a live one.
  lease_ = runtime::open_trainer_lease(cfg.runtime, "trainer-" + runtime::default_worker_id());
  if (lease_) {
    const uint64_t epoch = lease_->acquire(Deadline::after_seconds(cfg.runtime.trainer_lease_seconds + 5));
    o_.backends.buffer->set_epoch(epoch);
    o_.backends.queue->set_epoch(epoch);    // a replaced trainer that wakes can neither add tasks
    o_.backends.weights->set_epoch(epoch);  // nor publish weights
    if (ctx_.opts.fresh) reset_namespace();
  }
  // Versions this life may train on: the checkpoint's lineage (none without an RL
  // checkpoint: whatever an earlier life published died with it), then its own.
  lineage_ = saved ? runtime::VersionLineage::from_json(saved->contains("lineage") ? saved->at("lineage") : nullptr,
                                                        ctx_.state.policy_version)
                   : runtime::VersionLineage();
  runtime::ControllerConfig cc;
  // Dynamic sampling may need up to max_sampling_rounds prompts per trained group.
  cc.total_tasks = cfg.train.steps * P * (cfg.rollout.dynamic_sampling ? cfg.rollout.max_sampling_rounds : 1);
  cc.queue_ahead = log_queue_ahead(queue_ahead(cfg));  // deeper for streaming workers (job/queue_ahead.h)
  cc.drop_no_signal = cfg.rollout.dynamic_sampling;
  cc.max_queue_factor = cfg.rollout.max_sampling_rounds;
  cc.first_cursor = first_cursor_;
  cc.stale = {.max_staleness = cfg.runtime.max_staleness, .policy = cfg.runtime.stale_policy};
  cc.call_timeout_seconds = cfg.runtime.call_timeout_seconds;
  cc.lineage = &lineage_;
  const uint32_t G = static_cast<uint32_t>(cfg.loss.group_size);
  // What the trainer can take: token ids inside the model's vocabulary (an embedding lookup
  // outside it crashes), finite logprobs, G samples, routing of the model's shape, and no
  // version newer than the newest published.
  const io::HfConfig& mc = ctx_.policy->config();
  const runtime::RecordLimits limits{.vocab_size = mc.vocab_size,
                                     .group_size = G,
                                     .routing_layers = static_cast<uint16_t>(ctx_.policy->num_moe_layers()),
                                     .routing_top_k = static_cast<uint16_t>(mc.num_experts_per_tok),
                                     .num_experts = static_cast<uint32_t>(mc.num_experts)};
  cc.check = [this, limits](const runtime::ExperienceRecord& r) {
    runtime::RecordLimits l = limits;
    l.max_version = ctx_.state.policy_version;
    return runtime::check_record(r, l);
  };
  cc.task_cursor = [](const std::string& task_id) -> std::optional<uint64_t> {
    // Task ids are "c<cursor>" (the factory below).
    if (task_id.size() < 2 || task_id.size() > 20 || task_id[0] != 'c' ||
        task_id.find_first_not_of("0123456789", 1) != std::string::npos) {
      return std::nullopt;
    }
    return std::stoull(task_id.substr(1));
  };
  ctl_ = std::make_unique<runtime::AsyncController>(
      cc, *o_.backends.queue, *o_.backends.buffer,
      [this, G](uint64_t cursor, uint32_t attempt) {
        runtime::TaskUnit u = rollout::make_task_unit(ctx_.task->item(tasks::Split::kTrain, cursor), *ctx_.tok,
                                                      G, cursor);
        u.task_id = "c" + std::to_string(cursor);
        u.attempt = attempt;
        return u;
      },
      &acc_);
  // Without a snapshot the stream is read from its start: what an earlier life consumed but
  // never checkpointed comes back (deduplicated; its versions are not in the lineage).
  ctl_->restore(saved ? runtime::BufferSnapshot::decode(from_hex(saved->at("buffer").get<std::string>()))
                      : runtime::BufferSnapshot{},
                call_deadline());
}

std::shared_ptr<rollout::SharedWeightsWriter> QueueSource::shared_weights_writer() const {
  const runtime::RuntimeConfig& rt = ctx_.cfg.runtime;
  if (!rt.shared_weights || o_.handoff) return nullptr;  // in-process workers take versions in memory
  if (ctx_.world > 1) {
    throw Error("config: runtime.weight_transport = \"shared\" with a trainer group of " + std::to_string(ctx_.world) +
                    " ranks",
                "a trainer group's ranks each hold part of the experts and publish through the store: set "
                "weight_transport = \"store\"",
                ErrorCode::kInvalidInput);
  }
  // The files are per run (namespace and store), so two jobs on one host never read each
  // other's versions, and a restarted trainer rewrites its own instead of leaking new ones.
  char run[17];
  std::snprintf(run, sizeof run, "%016zx", std::hash<std::string>{}(ctx_.store->uri()));
  return std::make_shared<rollout::SharedWeightsWriter>(rt.shared_weights_dir, rt.ns + "-" + run);
}

void QueueSource::start() {
  on_lead("starting the async trainer", [&](const ep::ControlGroup::Beat&) { start_lead(); });
  publisher_ = std::make_unique<rollout::VersionPublisher>(
      *ctx_.store, *o_.backends.weights, o_.handoff,
      ctx_.path("scratch") + (ctx_.world > 1 ? "/rank-" + std::to_string(ctx_.rank) : std::string()),
      rollout::VersionPolicy{.keep = 3, .every = ctx_.cfg.runtime.publish_every, .group = ctx_.dp},
      shared_weights_writer());
  ctx_.state.policy_version = publisher_->publish(ctx_.state.policy_version, *ctx_.policy, call_deadline());
  if (!lead()) return;
  lineage_.begin(ctx_.state.policy_version);
  trained_.open(ctx_.path("trained.jsonl"), std::ios::app);
}

StepExperience QueueSource::take_batch(const ep::ControlGroup::Beat& beat) {
  const size_t P = static_cast<size_t>(ctx_.cfg.rollout.prompts_per_step);
  const size_t R = static_cast<size_t>(ctx_.world);
  const uint64_t version = ctx_.state.policy_version;
  check_lease();
  StepExperience out;
  std::vector<runtime::ExperienceRecord>& recs = out.records;
  double no_producer_since = 0;  // when nothing was queued, leased or buffered, yet not finished
  // NOTE: a trainer group trains batches that split evenly over its ranks (every rank must
  // make the same EP collective calls), so a short batch waits for the rest of its last share.
  double waited_since = now_seconds();  // for the "no experience" warning
  while (recs.empty() || recs.size() % R != 0) {
    const size_t want = recs.empty() ? P : R - recs.size() % R;
    const double slice = beat || o_.check_producers ? kBeatSeconds : kBatchWaitSeconds;
    for (auto& r : ctl_->next_batch(want, version, Deadline::after_seconds(slice))) recs.push_back(std::move(r));
    if (beat) beat();
    if (o_.check_producers) o_.check_producers();
    // Refill the queue now, so the workers generate the next batch while this one trains.
    ctl_->top_up(call_deadline());
    if (!recs.empty() && recs.size() % R == 0) break;
    if (ctl_->finished(call_deadline())) {  // every task done: nothing more comes
      // Only the run's last remainder, fewer records than ranks, stays untrained.
      const size_t rem = recs.size() % R;
      if (rem > 0) {
        surplus_ += static_cast<int64_t>(rem);
        MOERL_LOG(WARN) << "trainer: the run's last " << rem << " record(s) do not split over " << R
                        << " ranks; completed untrained (surplus)";
        recs.resize(recs.size() - rem);
      }
      if (recs.empty()) return out;
      break;
    }
    if (now_seconds() - waited_since >= kBatchWaitSeconds) {
      MOERL_LOG(WARN) << "trainer: no experience within " << kBatchWaitSeconds << " s; still waiting";
      waited_since = now_seconds();
    }
    // next_batch returns early, empty, when every task was created and none is queued: if no
    // task is leased and no record buffered either, nothing can ever arrive. Waiting would be
    // forever; say what is missing instead.
    const runtime::QueueDepth depth = o_.backends.queue->depth(call_deadline());
    if (depth.queued() > 0 || o_.backends.buffer->stats().available > 0) {
      no_producer_since = 0;
      continue;
    }
    if (no_producer_since == 0) no_producer_since = now_seconds();
    if (now_seconds() - no_producer_since >= kNoProducerGraceSeconds) {
      const runtime::AccountingReport rep = ctl_->report(call_deadline());
      throw Error("trainer: the run cannot finish: " + std::to_string(rep.get(runtime::Counter::kTasksCreated)) +
                      " tasks created, " + std::to_string(rep.get(runtime::Counter::kTasksCompleted)) +
                      " completed, none queued or leased and no experience buffered for " +
                      std::to_string(static_cast<int>(kNoProducerGraceSeconds)) +
                      " s: the experience of the rest was consumed but never trained",
                  "the experience stream no longer holds them (a Redis that lost its data, or a resume from a "
                  "checkpoint older than the stream keeps): rerun with --fresh (it also clears runtime.namespace)",
                  ErrorCode::kUnavailable);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  double stale_sum = 0, lag_sum = 0;
  uint64_t stale_max = 0;
  for (const auto& r : out.records) {
    const uint64_t s = runtime::staleness(r, version);
    stale_sum += static_cast<double>(s);
    stale_max = std::max(stale_max, s);
    lag_sum += static_cast<double>(runtime::token_lag_sum(r, version));
    out.generated_tokens += runtime::total_response_tokens(r);
    out.generate_seconds += r.generate_seconds;  // per worker, while generating
  }
  out.row["staleness_mean"] = stale_sum / static_cast<double>(out.records.size());
  out.row["staleness_max"] = stale_max;
  out.row["token_lag_mean"] = out.generated_tokens > 0 ? lag_sum / static_cast<double>(out.generated_tokens) : 0.0;
  return out;
}

std::vector<runtime::ExperienceRecord> QueueSource::scatter_batch(const std::vector<runtime::ExperienceRecord>& batch) {
  const size_t R = static_cast<size_t>(ctx_.world);
  std::vector<std::string> parts;
  if (lead()) {
    std::vector<runtime::ByteWriter> w(R);
    for (auto& x : w) x.put<uint32_t>(static_cast<uint32_t>(batch.size() / R));
    for (size_t i = 0; i < batch.size(); ++i) w[i % R].put_string(runtime::encode_experience(batch[i]));
    for (auto& x : w) parts.push_back(std::move(x.bytes()));
  }
  const std::string mine = ctx_.dp->scatter(parts);
  runtime::ByteReader rd(mine, "trainer group batch");
  std::vector<runtime::ExperienceRecord> out(rd.get<uint32_t>());
  for (auto& r : out) r = runtime::decode_experience(rd.get_string());
  return out;
}

StepExperience QueueSource::next_batch() {
  if (!ctx_.dp) {
    StepExperience out = take_batch({});
    batch_ = out.records;
    return out;
  }
  StepExperience out;
  on_lead("taking a batch of experience", [&](const ep::ControlGroup::Beat& beat) { out = take_batch(beat); });
  batch_ = std::move(out.records);
  out.records = scatter_batch(batch_);  // rank 0's own share too
  return out;
}

void QueueSource::after_step(StepExperience& step) {
  train::TrainerState& state = ctx_.state;
  // Collective in a trainer group: every rank writes its shard, rank 0 claims and commits.
  const double t0 = now_seconds();
  if (publisher_->due(state.policy_version)) {
    state.policy_version = publisher_->publish(state.policy_version, *ctx_.policy, call_deadline(),
                                               [this] { check_lease(); });
  }
  step.row["publish_s"] = now_seconds() - t0;
  step.row["version"] = state.policy_version;
  if (!lead()) return;
  int64_t samples = 0;
  for (const auto& r : batch_) {
    samples += static_cast<int64_t>(r.samples.size());
    trained_ << nlohmann::json{{"step", state.rl_step}, {"task_id", r.task_id}, {"attempt", r.attempt},
                               {"cursor", r.cursor}, {"worker", r.worker_id},
                               {"version", runtime::oldest_version(r)}, {"newest_version", runtime::newest_version(r)},
                               {"samples", r.samples.size()}}
                    .dump()
             << "\n";
  }
  trained_.flush();
  acc_.add(runtime::Counter::kSamplesTrained, samples);
  state.cursor = ctl_->data_cursor();
  runtime::AccountingReport rep = ctl_->report(call_deadline());
  step.row["queue_depth"] = rep.queue_depth;
  step.row["tasks_leased"] = o_.backends.queue->depth(call_deadline()).leased;
  step.row["tasks_lost"] = rep.lost;
  step.row["duplicates_dropped"] = rep.get(runtime::Counter::kDuplicatesDropped);
  step.row["stale_dropped"] = rep.get(runtime::Counter::kStaleDropped);
  step.row["tasks_requeued"] = rep.get(runtime::Counter::kTasksRequeued);
  step.row["dead_lettered"] = rep.get(runtime::Counter::kDeadLettered);
  step.row["records_quarantined"] = rep.get(runtime::Counter::kRecordsQuarantined);
  step.row["records_dead_lineage"] = rep.get(runtime::Counter::kDeadLineage);
  step.row["trainer_idle_fraction"] = rep.trainer_idle_fraction;
  step.row["rollout_idle_fraction"] = rep.rollout_idle_fraction;
  if (ctx_.cfg.rollout.dynamic_sampling) step.row["groups_filtered"] = rep.get(runtime::Counter::kGroupsFiltered);
  if (ctx_.world > 1) step.row["records_surplus"] = surplus_;
}

nlohmann::json QueueSource::snapshot() {
  if (!ctl_) return nullptr;  // before RL (the SFT checkpoint)
  check_lease();              // a replaced trainer writes no checkpoint
  pending_ = ctl_->snapshot();
  return {{"buffer", io::to_hex(pending_->encode())},
          {"first_cursor", first_cursor_},
          {"lineage", lineage_.to_json(ctx_.state.policy_version)}};
}

void QueueSource::checkpoint_committed() {
  if (!pending_) return;
  if (committed_before_) o_.backends.buffer->checkpoint_committed(*committed_before_, call_deadline());
  committed_before_ = std::move(pending_);
  pending_.reset();
}

void QueueSource::finish() {
  on_lead("finishing the async run", [&](const ep::ControlGroup::Beat& beat) { finish_lead(beat); });
}

void QueueSource::finish_lead(const ep::ControlGroup::Beat& beat) {
  const runtime::RuntimeConfig& rt = ctx_.cfg.runtime;
  // Redelivered copies of tasks already trained (a worker died between put and ack) may
  // still be queued: let the workers finish and ack them, so the queue ends empty.
  double last_beat = now_seconds();
  for (Deadline settle = Deadline::after_seconds(3 * rt.lease_seconds + 10); !settle.expired();) {
    if (o_.backends.queue->depth(call_deadline()).queued() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (beat && now_seconds() - last_beat >= kBeatSeconds) {
      beat();
      last_beat = now_seconds();
    }
  }
  // The run is over: workers drain when they see this marker.
  ctx_.store->put(rollout::kRunDoneKey, std::to_string(ctx_.state.policy_version));
  if (o_.before_report) o_.before_report();
}

void QueueSource::add_summary(nlohmann::json& summary) {
  summary["queue_url"] = runtime::redact_url(ctx_.cfg.runtime.queue_url);
  summary["num_workers"] = ctx_.cfg.rollout.num_workers;
  if (ctl_) summary["accounting"] = ctl_->report(call_deadline()).to_json();
  if (ctx_.world > 1) summary["records_surplus"] = surplus_;
}

}  // namespace moerl::job
