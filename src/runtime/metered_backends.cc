// Forwarding decorators over TaskQueue and ExperienceBuffer that count a worker's calls.
#include "runtime/metered_backends.h"

#include <algorithm>

#include "runtime/experience_buffer.h"
#include "runtime/task_queue.h"

namespace moerl::runtime {
namespace {

class MeteredQueue final : public TaskQueue {
 public:
  MeteredQueue(std::shared_ptr<TaskQueue> inner, const metrics::Labels& w, metrics::Registry& r)
      : inner_(std::move(inner)),
        leases_(r.counter("moerl_rollout_leases_total", "Tasks leased by the rollout worker.", w)),
        renewals_(r.counter("moerl_rollout_lease_renewals_total", "Lease renewals that kept the lease.", w)),
        lost_(r.counter("moerl_rollout_leases_lost_total",
                        "Leases found lost on renew, ack or nack (expired and taken by another worker).", w)),
        acked_(r.counter("moerl_rollout_tasks_acked_total", "Tasks completed (acknowledged).", w)),
        nacked_(r.counter("moerl_rollout_tasks_nacked_total", "Tasks handed back (drain, abort).", w)),
        held_(r.gauge("moerl_rollout_leases_held", "Leases the rollout worker holds now.", w)) {}

  void enqueue(const TaskUnit& t, Deadline d) override { inner_->enqueue(t, d); }
  bool enqueue_from(const TaskUnit& t, uint64_t next, Deadline d) override { return inner_->enqueue_from(t, next, d); }
  uint64_t producer_cursor(Deadline d) override { return inner_->producer_cursor(d); }
  void set_epoch(uint64_t epoch) override { inner_->set_epoch(epoch); }
  std::vector<Lease> lease(const std::string& worker, int n, double lease_seconds, Deadline d) override {
    std::vector<Lease> out = inner_->lease(worker, n, lease_seconds, d);
    leases_.inc(static_cast<double>(out.size()));
    held_.add(static_cast<double>(out.size()));
    return out;
  }
  bool renew(const Lease& l, Deadline d) override {
    const bool ok = inner_->renew(l, d);
    (ok ? renewals_ : lost_).inc();
    return ok;
  }
  bool ack(const Lease& l, Deadline d) override {
    const bool ok = inner_->ack(l, d);
    (ok ? acked_ : lost_).inc();
    held_.add(-1);
    return ok;
  }
  bool nack(const Lease& l, Deadline d) override {
    const bool ok = inner_->nack(l, d);
    (ok ? nacked_ : lost_).inc();
    held_.add(-1);
    return ok;
  }
  QueueDepth depth(Deadline d) override { return inner_->depth(d); }
  std::vector<TaskUnit> dead_letters(Deadline d) override { return inner_->dead_letters(d); }
  QueueStats stats() const override { return inner_->stats(); }

 private:
  std::shared_ptr<TaskQueue> inner_;
  metrics::Counter &leases_, &renewals_, &lost_, &acked_, &nacked_;
  metrics::Gauge& held_;
};

class MeteredBuffer final : public ExperienceBuffer {
 public:
  MeteredBuffer(std::shared_ptr<ExperienceBuffer> inner, const metrics::Labels& w, metrics::Registry& r)
      : inner_(std::move(inner)),
        records_(r.counter("moerl_rollout_records_total", "Experience records (prompt groups) put.", w)),
        samples_(r.counter("moerl_rollout_samples_total", "Samples (responses) put.", w)),
        tokens_(r.counter("moerl_rollout_response_tokens_total", "Response tokens generated and put.", w)),
        gen_s_(r.counter("moerl_rollout_generate_seconds_total", "Seconds spent generating the records put.", w)),
        rate_(r.gauge("moerl_rollout_tokens_per_second", "Response tokens per second of generation, last record.", w)),
        version_(r.gauge("moerl_rollout_policy_version", "Newest policy version in the records put.", w)),
        reward_(r.histogram("moerl_rollout_reward", "Rewards of the samples put.",
                            {-1, -0.5, 0, 0.25, 0.5, 0.75, 1, 2}, w)) {}

  void put(const ExperienceRecord& rec, Deadline d) override {
    inner_->put(rec, d);
    const double tokens = static_cast<double>(total_response_tokens(rec));
    records_.inc();
    samples_.inc(static_cast<double>(rec.samples.size()));
    tokens_.inc(tokens);
    if (rec.generate_seconds > 0) {
      gen_s_.inc(rec.generate_seconds);
      rate_.set(tokens / rec.generate_seconds);
    }
    for (const Sample& s : rec.samples) reward_.observe(s.reward);
    version_.set(static_cast<double>(newest_version(rec)));
  }
  std::vector<ExperienceRecord> take(size_t n, Deadline d) override { return inner_->take(n, d); }
  void unget(std::vector<ExperienceRecord> r) override { inner_->unget(std::move(r)); }
  BufferSnapshot snapshot() override { return inner_->snapshot(); }
  void restore(const BufferSnapshot& s, Deadline d) override { inner_->restore(s, d); }
  void checkpoint_committed(const BufferSnapshot& s, Deadline d) override { inner_->checkpoint_committed(s, d); }
  BufferStats stats() const override { return inner_->stats(); }
  void settle_below(uint64_t cursor) override { inner_->settle_below(cursor); }
  void set_quarantine(RecordCheck check, QuarantineHandler on_quarantine) override {
    inner_->set_quarantine(std::move(check), std::move(on_quarantine));
  }
  void set_epoch(uint64_t epoch) override { inner_->set_epoch(epoch); }

 private:
  std::shared_ptr<ExperienceBuffer> inner_;
  metrics::Counter &records_, &samples_, &tokens_, &gen_s_;
  metrics::Gauge &rate_, &version_;
  metrics::Histogram& reward_;
};

}  // namespace

RuntimeBackends metered_worker_backends(RuntimeBackends b, const std::string& worker_id, metrics::Registry& registry) {
  const metrics::Labels w = {{"worker", worker_id}};
  b.queue = std::make_shared<MeteredQueue>(std::move(b.queue), w, registry);
  b.buffer = std::make_shared<MeteredBuffer>(std::move(b.buffer), w, registry);
  return b;
}

}  // namespace moerl::runtime
