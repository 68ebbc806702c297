// Test-only: the ObjectStore contract every backend must meet, as a value-parameterised
// suite (object_store_contract_test.cc). Each backend's test file instantiates it, e.g. in
// local_store_test.cc:
//
//   const StoreBackend kLocal{"Local", [](const std::string& root) { return std::make_unique<LocalStore>(root); }};
//   INSTANTIATE_TEST_SUITE_P(Local, ObjectStoreContract, ::testing::Values(kLocal));
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "store/object_store.h"
#include "store/testing/test_util.h"

namespace moerl::store::testing {

struct StoreBackend {
  std::string name;
  // Opens an empty store for one test; `root` is a scratch directory the test owns.
  std::function<std::unique_ptr<ObjectStore>(const std::string& root)> open;
};

inline std::ostream& operator<<(std::ostream& os, const StoreBackend& b) { return os << b.name; }

class ObjectStoreContract : public ::testing::TestWithParam<StoreBackend> {
 protected:
  void SetUp() override { store_ = GetParam().open(root_.path()); }
  ObjectStore& store() { return *store_; }
  TempDir tmp_;  // files for put_file / get_file

 private:
  TempDir root_;
  std::unique_ptr<ObjectStore> store_;
};

}  // namespace moerl::store::testing
