// The metered worker backends over the in-process queue and buffer: calls reach the real
// backend unchanged, and the worker's counters say what happened (a lease lost to another
// worker included).
#include "runtime/metered_backends.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "runtime/in_process_queue.h"
#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

double value(const metrics::Registry& reg, const std::string& series) { return reg.to_json().value(series, -1.0); }

TEST(MeteredBackends, CountWhatTheWorkerDid) {
  metrics::Registry reg;
  RuntimeBackends real{std::make_shared<InProcessTaskQueue>(), std::make_shared<InProcessExperienceBuffer>(), nullptr};
  RuntimeBackends b = metered_worker_backends(real, "w1", reg);
  ASSERT_NE(b.queue, real.queue);
  const Deadline d = Deadline::after_seconds(5);
  for (int i = 0; i < 3; ++i) real.queue->enqueue(make_task("t" + std::to_string(i), i), d);
  std::vector<Lease> leases = b.queue->lease("w1", 3, 0.2, d);
  ASSERT_EQ(leases.size(), 3u);
  EXPECT_EQ(value(reg, "moerl_rollout_leases_held{worker=\"w1\"}"), 3);
  EXPECT_TRUE(b.queue->renew(leases[0], d));
  ExperienceRecord rec = record_for(leases[0].task, "w1", 7);
  rec.generate_seconds = 0.5;
  b.buffer->put(rec, d);
  EXPECT_TRUE(b.queue->ack(leases[0], d));
  EXPECT_TRUE(b.queue->nack(leases[1], d));
  // The third lease expires and another worker takes the task: this worker's ack finds it gone.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<Lease> other = real.queue->lease("w2", 2, 30, d);
  EXPECT_FALSE(b.queue->ack(leases[2], d));
  EXPECT_EQ(value(reg, "moerl_rollout_leases_total{worker=\"w1\"}"), 3);
  EXPECT_EQ(value(reg, "moerl_rollout_lease_renewals_total{worker=\"w1\"}"), 1);
  EXPECT_EQ(value(reg, "moerl_rollout_tasks_acked_total{worker=\"w1\"}"), 1);
  EXPECT_EQ(value(reg, "moerl_rollout_tasks_nacked_total{worker=\"w1\"}"), 1);
  EXPECT_EQ(value(reg, "moerl_rollout_leases_lost_total{worker=\"w1\"}"), 1);
  EXPECT_EQ(value(reg, "moerl_rollout_leases_held{worker=\"w1\"}"), 0);
  EXPECT_EQ(value(reg, "moerl_rollout_records_total{worker=\"w1\"}"), 1);
  EXPECT_EQ(value(reg, "moerl_rollout_samples_total{worker=\"w1\"}"), 2);
  EXPECT_EQ(value(reg, "moerl_rollout_response_tokens_total{worker=\"w1\"}"), total_response_tokens(rec));
  EXPECT_EQ(value(reg, "moerl_rollout_tokens_per_second{worker=\"w1\"}"), total_response_tokens(rec) / 0.5);
  EXPECT_EQ(value(reg, "moerl_rollout_policy_version{worker=\"w1\"}"), 7);
  EXPECT_EQ(value(reg, "moerl_rollout_reward_count{worker=\"w1\"}"), 2);
  EXPECT_EQ(value(reg, "moerl_rollout_reward_sum{worker=\"w1\"}"), 0.5);  // rewards 0 and 0.5
  // The record reached the real buffer as it was.
  std::vector<ExperienceRecord> got = real.buffer->take(1, d);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].task_id, rec.task_id);
  EXPECT_EQ(got[0].samples.size(), rec.samples.size());
}

}  // namespace
}  // namespace moerl::runtime
