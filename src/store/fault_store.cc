// FaultInjectingStore: counters decide, under one mutex, whether a call passes through.
#include "store/fault_store.h"

#include "base/error.h"

namespace moerl::store {

FaultInjectingStore::FaultInjectingStore(std::shared_ptr<ObjectStore> inner, FaultPlan plan)
    : inner_(std::move(inner)), plan_(std::move(plan)) {}

void FaultInjectingStore::set_plan(FaultPlan plan) {
  std::lock_guard<std::mutex> lock(mu_);
  plan_ = std::move(plan);
  crashed_ = false;
  writes_ = 0;
}

int64_t FaultInjectingStore::writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_;
}
int64_t FaultInjectingStore::injected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return injected_;
}
bool FaultInjectingStore::crashed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return crashed_;
}

void FaultInjectingStore::before_call(const char* op, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (crashed_) {
    throw Error(uri() + ": injected crash: " + op + " '" + key + "' after " + std::to_string(writes_) + " writes",
                "expected in fault-injection tests", ErrorCode::kUnavailable);
  }
  if (plan_.fail_next_calls > 0) {
    --plan_.fail_next_calls;
    ++injected_;
    throw Error(uri() + ": injected transient failure: " + op + " '" + key + "' (503 SlowDown)",
                "expected in fault-injection tests; retry", ErrorCode::kUnavailable);
  }
}

FaultInjectingStore::WriteAction FaultInjectingStore::before_write(const char* op, const std::string& key) {
  before_call(op, key);
  std::lock_guard<std::mutex> lock(mu_);
  if (!plan_.only_keys_containing.empty() && key.find(plan_.only_keys_containing) == std::string::npos) {
    return WriteAction::kWrite;
  }
  int64_t index = writes_++;
  if (plan_.crash_after_writes >= 0 && index >= plan_.crash_after_writes) {
    crashed_ = true;
    ++injected_;
    throw Error(uri() + ": injected crash before write #" + std::to_string(index) + " (" + op + " '" + key + "')",
                "expected in fault-injection tests", ErrorCode::kUnavailable);
  }
  if (index == plan_.fail_write_at) {
    ++injected_;
    throw Error(uri() + ": injected failure of write #" + std::to_string(index) + " (" + op + " '" + key + "')",
                "expected in fault-injection tests", ErrorCode::kIo);
  }
  if (index == plan_.drop_write_at) {
    ++injected_;
    return WriteAction::kDrop;
  }
  return WriteAction::kWrite;
}

void FaultInjectingStore::put(const std::string& key, std::string_view bytes) {
  if (before_write("put", key) == WriteAction::kWrite) inner_->put(key, bytes);
}

void FaultInjectingStore::put_file(const std::string& key, const std::string& path) {
  if (before_write("put_file", key) == WriteAction::kWrite) inner_->put_file(key, path);
}

PutOutcome FaultInjectingStore::put_if_absent(const std::string& key, std::string_view bytes) {
  if (before_write("put_if_absent", key) == WriteAction::kDrop) return PutOutcome::kCreated;
  return inner_->put_if_absent(key, bytes);
}

std::string FaultInjectingStore::get(const std::string& key) {
  before_call("get", key);
  return inner_->get(key);
}

std::string FaultInjectingStore::get_range(const std::string& key, uint64_t offset, uint64_t length) {
  before_call("get_range", key);
  return inner_->get_range(key, offset, length);
}

void FaultInjectingStore::get_file(const std::string& key, const std::string& path) {
  before_call("get_file", key);
  inner_->get_file(key, path);
}

std::optional<ObjectInfo> FaultInjectingStore::head(const std::string& key) {
  before_call("head", key);
  return inner_->head(key);
}

void FaultInjectingStore::remove(const std::string& key) {
  before_call("remove", key);
  inner_->remove(key);
}

std::vector<ObjectInfo> FaultInjectingStore::list(const std::string& prefix) {
  before_call("list", prefix);
  return inner_->list(prefix);
}

std::vector<PendingUpload> FaultInjectingStore::list_pending(const std::string& prefix) {
  before_call("list_pending", prefix);
  return inner_->list_pending(prefix);
}

void FaultInjectingStore::abort_pending(const PendingUpload& upload) {
  before_call("abort_pending", upload.key);
  inner_->abort_pending(upload);
}

}  // namespace moerl::store
