// The commit protocol for checkpoints and published weight versions, on any ObjectStore
// (spec: docs/formats/store_commit.md). A commit is a prefix "ROOT/NAME" holding shard
// objects and, written LAST with a conditional create, "ROOT/NAME/manifest.moerl.json"
// listing every shard with its size and sha256. Readers trust only manifests and verify what
// they read; "ROOT/latest" points at the newest commit; cleanup() removes shards that no
// manifest covers and aborts stale uploads. The store does not know what the shards are.
//
//   CommitWriter w(*store, "ckpt/step-000100");
//   w.put_file("model.safetensors", "/tmp/model.safetensors");
//   w.put_bytes("trainer_state.json", state_json);
//   w.commit({{"step", 100}});                        // manifest, then ckpt/latest
//   // Several processes: each puts its shards with its own writer; one adopt()s the others'
//   // entries (passed as to_json) and commits.
//
//   if (auto r = CommitReader::latest(*store, "ckpt")) {
//     r->get_file("model.safetensors", "/tmp/restore.safetensors");   // size + sha256 checked
//     int step = r->manifest().extra["step"];
//   }
//
// Thread-safety: a CommitWriter or CommitReader is used by one thread; different ones may run
// concurrently on the same store. Failures: moerl::Error; a writer that throws (or a process
// that dies) before commit() leaves no manifest, so readers never see the partial commit.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "store/object_store.h"

namespace moerl::store {

inline constexpr const char* kManifestName = "manifest.moerl.json";
inline constexpr const char* kLatestName = "latest";
inline constexpr const char* kManifestMagic = "moerl-commit";
inline constexpr const char* kLatestMagic = "moerl-latest";
inline constexpr int kManifestVersion = 1;

struct CommitEntry {
  std::string name;  // relative to the commit prefix
  uint64_t size = 0;
  std::string sha256;  // lowercase hex
};

// An entry as JSON ({"name", "size", "sha256"}) and back: how a shard that one process put
// reaches the process that commits it (CommitWriter::adopt). from_json throws moerl::Error
// naming `where` on a malformed entry.
nlohmann::json to_json(const CommitEntry& e);
CommitEntry commit_entry_from_json(const nlohmann::json& j, const std::string& where);

struct Manifest {
  std::string prefix;  // "ckpt/step-000100"
  int64_t created_unix = 0;
  std::vector<CommitEntry> objects;
  nlohmann::json extra = nlohmann::json::object();  // the writer's metadata

  const CommitEntry* find(const std::string& name) const;
  std::string to_json() const;  // with magic, version and checksum
  // Rejects a wrong magic, an unknown version, a bad checksum or missing fields, naming `where`.
  static Manifest parse(std::string_view text, const std::string& where);
};

enum class LatestPointer { kUpdate, kLeave };

class CommitWriter {
 public:
  // prefix: where the commit goes, "ROOT/NAME" (e.g. "ckpt/step-000100" or "weights/v7").
  CommitWriter(ObjectStore& store, std::string prefix);

  // Hashes the file, then streams it to PREFIX/name.
  void put_file(const std::string& name, const std::string& path);
  void put_bytes(const std::string& name, std::string_view bytes);
  // Adds a shard that another writer of this same commit (another rank) put under the prefix;
  // commit() checks its stored size like the writer's own.
  void adopt(const CommitEntry& entry);
  // The shards put or adopted so far.
  const std::vector<CommitEntry>& entries() const { return entries_; }
  // Checks every shard's stored size, writes the manifest with put_if_absent, then (kUpdate)
  // points ROOT/latest at this prefix. Committing a prefix that already holds a different
  // manifest is an error; an identical one (a retried commit) is accepted.
  Manifest commit(const nlohmann::json& extra = nlohmann::json::object(),
                  LatestPointer latest = LatestPointer::kUpdate);

  const std::string& prefix() const { return prefix_; }

 private:
  void check_name(const std::string& name) const;
  void add(const std::string& name, uint64_t size, std::string sha256);

  ObjectStore& store_;
  std::string prefix_;
  std::vector<CommitEntry> entries_;
  bool committed_ = false;
};

enum class Verify { kSizes, kNone };

// A commit whose bytes no longer match its manifest (a shard missing, resized or altered, a
// manifest that fails its checksum): the data is damaged, not unreachable. Readers may fall
// back to an older commit on this error, never on a store that is merely down.
class DamagedCommit : public Error {
 public:
  DamagedCommit(std::string message, std::string hint) : Error(std::move(message), std::move(hint), ErrorCode::kIo) {}
};

class CommitReader {
 public:
  // Reads and checks PREFIX's manifest; kSizes also HEADs every shard and compares sizes.
  // Throws Error(kNotFound) when the prefix has no manifest (not committed).
  static CommitReader open(ObjectStore& store, const std::string& prefix, Verify verify = Verify::kSizes);
  // The commit ROOT/latest names; if the pointer is missing or names no valid commit, the
  // committed prefix with the greatest name. nullopt when ROOT holds no commit.
  static std::optional<CommitReader> latest(ObjectStore& store, const std::string& root);

  const Manifest& manifest() const { return manifest_; }
  // Where the commit is read from (manifest().prefix is where it was written).
  const std::string& prefix() const { return prefix_; }
  bool has(const std::string& name) const { return manifest_.find(name) != nullptr; }
  std::vector<std::string> names() const;
  // Both verify size and sha256 against the manifest; get_file removes path on a mismatch.
  std::string get_bytes(const std::string& name);
  void get_file(const std::string& name, const std::string& path);

 private:
  CommitReader(ObjectStore& store, std::string prefix, Manifest manifest)
      : store_(&store), prefix_(std::move(prefix)), manifest_(std::move(manifest)) {}
  const CommitEntry& entry(const std::string& name) const;

  ObjectStore* store_;
  std::string prefix_;
  Manifest manifest_;
};

// Committed prefixes directly under root ("ROOT/NAME" with a manifest), sorted by name.
std::vector<std::string> list_commits(ObjectStore& store, const std::string& root);

struct CleanupReport {
  std::vector<std::string> removed_objects;
  std::vector<std::string> aborted_uploads;  // keys whose pending uploads were aborted
};

// Under root: removes objects of every ROOT/NAME/ without a manifest, and objects a manifest
// does not list, when the newest of them is older than grace_seconds; aborts pending uploads
// started more than grace_seconds ago. Manifests and ROOT/latest are never removed.
CleanupReport cleanup(ObjectStore& store, const std::string& root, double grace_seconds);

// Deletes all but the newest `keep` commits under root (by name): manifest first, then shards,
// so a reader sees a commit whole or not at all. Commits in `pinned` (prefixes) and the one
// ROOT/latest points at are kept too. Returns the prefixes removed.
std::vector<std::string> retain_latest(ObjectStore& store, const std::string& root, size_t keep,
                                       const std::set<std::string>& pinned = {});

}  // namespace moerl::store
