// MemoryStore: a named, mutex-guarded map shared by every store opened with that name.
#include "store/memory_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <ctime>

#include "base/error.h"
#include "base/files.h"
#include "store/file_util.h"

namespace moerl::store {

MemoryStore::MemoryStore(const std::string& name) : name_(name) {
  static std::mutex registry_mu;
  static std::map<std::string, std::shared_ptr<State>> registry;  // guarded by registry_mu
  std::lock_guard<std::mutex> lock(registry_mu);
  auto& slot = registry[name];
  if (!slot) slot = std::make_shared<State>();
  state_ = slot;
}

ObjectInfo MemoryStore::info(const std::string& key, const Entry& e) const {
  return {key, e.data.size(), "g" + std::to_string(e.generation), e.mtime_unix};
}

void MemoryStore::put(const std::string& key, std::string_view bytes) {
  validate_key(key);
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->objects[key] = Entry{std::string(bytes), state_->next_generation++, std::time(nullptr)};
}

void MemoryStore::put_file(const std::string& key, const std::string& path) {
  validate_key(key);
  // NOTE: memory-backed by definition; the bytes do end up in memory.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("no file '" + path + "'", "check the source path", ErrorCode::kNotFound);
  std::string data = read_all(fd, path);
  ::close(fd);
  put(key, data);
}

PutOutcome MemoryStore::put_if_absent(const std::string& key, std::string_view bytes) {
  validate_key(key);
  std::lock_guard<std::mutex> lock(state_->mu);
  auto [it, inserted] = state_->objects.try_emplace(key);
  if (!inserted) return PutOutcome::kAlreadyExists;
  it->second = Entry{std::string(bytes), state_->next_generation++, std::time(nullptr)};
  return PutOutcome::kCreated;
}

std::string MemoryStore::get(const std::string& key) {
  validate_key(key);
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->objects.find(key);
  if (it == state_->objects.end()) {
    throw Error(uri() + ": no object '" + key + "'", "list the store to see its keys", ErrorCode::kNotFound);
  }
  return it->second.data;
}

std::string MemoryStore::get_range(const std::string& key, uint64_t offset, uint64_t length) {
  std::string data = get(key);
  if (offset > data.size()) {
    throw Error(uri() + ": range offset " + std::to_string(offset) + " is past the end of '" + key + "' (" +
                    std::to_string(data.size()) + " bytes)",
                "read at offsets below the object's size (see head())");
  }
  return data.substr(offset, length);
}

void MemoryStore::get_file(const std::string& key, const std::string& path) {
  write_file_atomic(path, get(key));
}

std::optional<ObjectInfo> MemoryStore::head(const std::string& key) {
  validate_key(key);
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->objects.find(key);
  if (it == state_->objects.end()) return std::nullopt;
  return info(key, it->second);
}

void MemoryStore::remove(const std::string& key) {
  validate_key(key);
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->objects.erase(key);
}

std::vector<ObjectInfo> MemoryStore::list(const std::string& prefix) {
  validate_prefix(prefix);
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<ObjectInfo> out;
  for (auto it = state_->objects.lower_bound(prefix); it != state_->objects.end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    out.push_back(info(it->first, it->second));
  }
  return out;
}

void MemoryStore::set_mtime(const std::string& key, int64_t mtime_unix) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->objects.find(key);
  if (it != state_->objects.end()) it->second.mtime_unix = mtime_unix;
}

}  // namespace moerl::store
