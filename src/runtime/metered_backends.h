// A rollout worker's queue and buffer, metered: decorators that forward every call to the
// real backend and count what the worker did in a metrics::Registry, for its Prometheus
// endpoint. Labels: worker=<worker id>.
//   moerl_rollout_leases_total, moerl_rollout_lease_renewals_total, moerl_rollout_leases_lost_total
//   (a renew/ack/nack that found the lease gone), moerl_rollout_tasks_acked_total,
//   moerl_rollout_tasks_nacked_total, moerl_rollout_leases_held (gauge);
//   moerl_rollout_records_total, moerl_rollout_samples_total, moerl_rollout_response_tokens_total,
//   moerl_rollout_generate_seconds_total, moerl_rollout_tokens_per_second (gauge, last record),
//   moerl_rollout_policy_version (gauge, newest version in a record), moerl_rollout_reward
//   (histogram of sample rewards).
//
//   RuntimeBackends b = metered_worker_backends(open_backends(cfg), "pod-3", metrics::default_registry());
// A call counts when it returns (a call that throws counts nothing). Thread-safe as the
// wrapped backends are; the registry outlives the decorators.
#pragma once

#include <string>

#include "base/metrics.h"
#include "runtime/runtime_config.h"

namespace moerl::runtime {

// The same backends with queue and buffer metered for `worker_id`; the registry is shared.
RuntimeBackends metered_worker_backends(RuntimeBackends backends, const std::string& worker_id,
                                        metrics::Registry& registry);

}  // namespace moerl::runtime
