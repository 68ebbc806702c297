// Multi-process test harness for ep/: a parent test re-executes this test binary once per
// rank, with the torchrun variables set and a gtest filter selecting the worker test,
// and waits (with a deadline) for every rank. The worker looks up the scenario by name.
//
//   EXPECT_EQ(testing::run_ranks("delivery", 2, {{"FI_PROVIDER", "shm"}}), std::vector<int>(2, 0));
//   MOERL_EP_SCENARIO(delivery) { ... uses env RANK/WORLD_SIZE ... }
#pragma once

#include <map>
#include <string>
#include <vector>

namespace moerl::ep::testing {

using Scenario = void (*)();
std::map<std::string, Scenario>& scenarios();
struct RegisterScenario {
  RegisterScenario(const char* name, Scenario fn) { scenarios()[name] = fn; }
};

// Exit status of each rank (0 = its worker test passed); -1 if killed at the deadline.
std::vector<int> run_ranks(const std::string& scenario, int world_size,
                           const std::map<std::string, std::string>& env, double timeout_s = 120);

}  // namespace moerl::ep::testing

#define MOERL_EP_SCENARIO(name)                                                                 \
  static void moerl_scenario_##name();                                                          \
  static ::moerl::ep::testing::RegisterScenario moerl_reg_##name(#name, moerl_scenario_##name); \
  static void moerl_scenario_##name()
