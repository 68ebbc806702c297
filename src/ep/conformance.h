// The EP conformance harness: a contract (the behaviour ep.h promises) is written once and
// runs as one gtest per backend that runs on a CPU: loopback on one rank (in process),
// fabric over libfabric shm and tcp (on the loopback interface) and alltoall over Gloo, on
// 2 and 4 ranks (separate processes, test_ranks.h), and hierarchical as 2 nodes of 2, 2
// nodes of 1 and 1 node of 4 (LOCAL_WORLD_SIZE). Contracts may live in any ep test file.
//
//   using testing::EpConformance;
//   EP_CONTRACT(Delivery) {                       // `backend` is the ep::Backend under test
//     for (Mode m : testing::modes(backend)) check_case(*make_group(testing::config(backend, m, 64, 32), 8), ...);
//   }
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ep/ep.h"

namespace moerl::ep::testing {

struct BackendParam {
  Backend backend;
  int ranks;             // 1: in this process; more: one process per rank
  const char* provider;  // FI_PROVIDER for fabric (hierarchical: its inter-node hop), else nullptr
  int local_world_size = 0;  // LOCAL_WORLD_SIZE for the ranks (hierarchical's nodes); 0: unset
};

class EpConformance : public ::testing::TestWithParam<BackendParam> {};

using Contract = void (*)(Backend backend);
struct RegisterContract {
  RegisterContract(const char* name, Contract fn);
};
// Runs contract `name` for the parameter: in process, or on p.ranks processes (every
// rank must pass).
void run_contract(const std::string& name, const BackendParam& p);

// The modes a backend implements (loopback ignores Mode: normal only).
std::vector<Mode> modes(Backend b);
Config config(Backend b, Mode m, int64_t max_tokens, int64_t hidden, int64_t max_topk = 8);

}  // namespace moerl::ep::testing

#define EP_CONTRACT(name)                                                                                  \
  static void moerl_contract_##name(::moerl::ep::Backend backend);                                         \
  static ::moerl::ep::testing::RegisterContract moerl_contract_reg_##name(#name, moerl_contract_##name);   \
  TEST_P(EpConformance, name) { ::moerl::ep::testing::run_contract(#name, GetParam()); }                   \
  static void moerl_contract_##name(::moerl::ep::Backend backend)
