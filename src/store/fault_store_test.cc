// FaultInjectingStore with an empty plan is a transparent ObjectStore: it runs the ObjectStore
// contract (testing/store_contract.h) over a MemoryStore. Its faults are exercised by the
// commit tests (commit_test.cc) and the S3 chaos test (s3/s3_fault_test.cc).
#include "store/fault_store.h"

#include <gtest/gtest.h>

#include <atomic>

#include "store/memory_store.h"
#include "store/testing/store_contract.h"

namespace moerl::store {
namespace {

using testing::ObjectStoreContract;
using testing::StoreBackend;

const StoreBackend kFault{"Fault", [](const std::string&) -> std::unique_ptr<ObjectStore> {
  static std::atomic<int> n{0};
  auto inner = std::make_shared<MemoryStore>("fault-contract-" + std::to_string(n++));
  return std::make_unique<FaultInjectingStore>(inner, FaultPlan{});
}};
INSTANTIATE_TEST_SUITE_P(Fault, ObjectStoreContract, ::testing::Values(kFault));

}  // namespace
}  // namespace moerl::store
