// Test-only: the contract every TaskQueue, ExperienceBuffer and WeightRegistry backend must
// meet, as value-parameterised gtest suites (task_queue_contract_test.cc,
// experience_buffer_contract_test.cc). Each backend's test file implements QueueBackend and
// instantiates the suites, e.g. in in_process_queue_test.cc:
//
//   const QueueBackendFactory kInProcess{"InProcess", [] { return std::make_unique<InProcessBackend>(); }};
//   INSTANTIATE_TEST_SUITE_P(InProcess, TaskQueueContract, ::testing::Values(kInProcess));
//
// A backend is started per test (Redis: its own redis-server) and stopped at teardown.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "runtime/experience_buffer.h"
#include "runtime/task_queue.h"
#include "runtime/weight_registry.h"

namespace moerl::runtime {

// One running backend. Every call opens a client on the shared state named `ns`: in-process,
// the one object of that name (created on first open); Redis, a new connection to NS:* keys.
class QueueBackend {
 public:
  virtual ~QueueBackend() = default;
  std::shared_ptr<TaskQueue> queue(const std::string& ns) { return open_queue(ns, QueueOptions{}); }
  // `options` apply when the queue is created (in-process) or to this client (Redis).
  virtual std::shared_ptr<TaskQueue> open_queue(const std::string& ns, QueueOptions options) = 0;
  virtual std::shared_ptr<ExperienceBuffer> buffer(const std::string& ns) = 0;
  virtual std::shared_ptr<WeightRegistry> weights(const std::string& ns) = 0;
  // The trainer process dies: in-process, the buffer `ns` dies with it (the next buffer(ns)
  // is a new, empty one); Redis keeps the stream, so nothing happens.
  virtual void kill_trainer(const std::string& ns) = 0;
};

struct QueueBackendFactory {
  std::string name;
  std::function<std::unique_ptr<QueueBackend>()> start;
};

inline std::ostream& operator<<(std::ostream& os, const QueueBackendFactory& f) { return os << f.name; }

class QueueContractTest : public ::testing::TestWithParam<QueueBackendFactory> {
 protected:
  void SetUp() override { backend_ = GetParam().start(); }
  void TearDown() override { backend_.reset(); }
  QueueBackend& backend() { return *backend_; }

 private:
  std::unique_ptr<QueueBackend> backend_;
};

// One suite per interface; a backend instantiates each it implements.
class TaskQueueContract : public QueueContractTest {};
class ExperienceBufferContract : public QueueContractTest {};
class WeightRegistryContract : public QueueContractTest {};

}  // namespace moerl::runtime
