// Commit protocol: shards, then a checksummed manifest by conditional create, then `latest`.
#include "store/commit.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <set>

#include "base/error.h"
#include "base/log.h"
#include "io/checksum.h"

namespace moerl::store {

using nlohmann::json;

static std::string parent_of(const std::string& prefix) {
  size_t slash = prefix.rfind('/');
  return slash == std::string::npos ? "" : prefix.substr(0, slash);
}

const CommitEntry* Manifest::find(const std::string& name) const {
  for (const auto& e : objects) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

json to_json(const CommitEntry& e) { return {{"name", e.name}, {"size", e.size}, {"sha256", e.sha256}}; }

CommitEntry commit_entry_from_json(const json& j, const std::string& where) {
  try {
    return {j.at("name").get<std::string>(), j.at("size").get<uint64_t>(), j.at("sha256").get<std::string>()};
  } catch (const json::exception& e) {
    throw Error(where + ": malformed commit entry " + j.dump() + " (" + e.what() + ")",
                "entries come from CommitWriter::entries() of the same moerl build", ErrorCode::kInternal);
  }
}

static json manifest_body(const Manifest& m) {
  json objects = json::array();
  for (const auto& e : m.objects) objects.push_back(to_json(e));
  return {{"magic", kManifestMagic}, {"version", kManifestVersion}, {"prefix", m.prefix},
          {"created_unix", m.created_unix}, {"objects", objects}, {"extra", m.extra}};
}

std::string Manifest::to_json() const {
  json j = manifest_body(*this);
  // NOTE: nlohmann::json keeps object keys sorted, so dump() is canonical for the checksum.
  j["checksum"] = io::sha256_hex(j.dump());
  return j.dump(1) + "\n";
}

Manifest Manifest::parse(std::string_view text, const std::string& where) {
  auto bad = [&](const std::string& why) {
    return DamagedCommit("manifest " + where + ": " + why,
                         "the commit is damaged or was written by another tool; do not use it (cleanup() ignores "
                         "manifests)");
  };
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    throw bad(std::string("not JSON (") + e.what() + ")");
  }
  if (!j.is_object() || j.value("magic", "") != kManifestMagic) throw bad("magic is not \"moerl-commit\"");
  if (!j.contains("version") || !j["version"].is_number_integer()) throw bad("no integer version");
  if (j["version"].get<int>() != kManifestVersion) {
    throw Error("manifest " + where + ": version " + std::to_string(j["version"].get<int>()) +
                    " is not supported (this moerl reads version " + std::to_string(kManifestVersion) + ")",
                "read it with the moerl version that wrote it", ErrorCode::kInvalidInput);
  }
  std::string checksum = j.value("checksum", "");
  j.erase("checksum");
  if (checksum != io::sha256_hex(j.dump())) throw bad("checksum mismatch (the manifest was altered or truncated)");
  Manifest m;
  try {
    m.prefix = j.at("prefix").get<std::string>();
    m.created_unix = j.at("created_unix").get<int64_t>();
    m.extra = j.at("extra");
    for (const auto& o : j.at("objects")) {
      m.objects.push_back({o.at("name").get<std::string>(), o.at("size").get<uint64_t>(), o.at("sha256").get<std::string>()});
    }
  } catch (const json::exception& e) {
    throw bad(std::string("missing or mistyped field (") + e.what() + ")");
  }
  return m;
}

CommitWriter::CommitWriter(ObjectStore& store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
  validate_key(prefix_);
}

void CommitWriter::check_name(const std::string& name) const {
  if (committed_) throw Error("commit " + prefix_ + ": put after commit()", "start a new CommitWriter for a new version");
  validate_key(name);
  if (name == kManifestName) throw Error("commit " + prefix_ + ": shard name '" + name + "' is reserved", "rename the shard");
  for (const auto& e : entries_) {
    if (e.name == name) throw Error("commit " + prefix_ + ": shard '" + name + "' written twice", "give each shard one name");
  }
}

void CommitWriter::add(const std::string& name, uint64_t size, std::string sha256) {
  entries_.push_back({name, size, std::move(sha256)});
}

void CommitWriter::put_file(const std::string& name, const std::string& path) {
  check_name(name);
  uint64_t size = 0;
  std::string sha = io::sha256_file_hex(path, &size);
  store_.put_file(join_key(prefix_, name), path);
  add(name, size, sha);
}

void CommitWriter::adopt(const CommitEntry& entry) {
  check_name(entry.name);
  add(entry.name, entry.size, entry.sha256);
}

void CommitWriter::put_bytes(const std::string& name, std::string_view bytes) {
  check_name(name);
  store_.put(join_key(prefix_, name), bytes);
  add(name, bytes.size(), io::sha256_hex(bytes));
}

Manifest CommitWriter::commit(const json& extra, LatestPointer latest) {
  if (committed_) throw Error("commit " + prefix_ + ": commit() called twice", "start a new CommitWriter");
  // Shards must all be there at their full size before the manifest vouches for them.
  for (const auto& e : entries_) {
    auto h = store_.head(join_key(prefix_, e.name));
    if (!h || h->size != e.size) {
      throw Error("commit " + prefix_ + ": shard '" + e.name + "' is " +
                      (h ? std::to_string(h->size) + " bytes in the store, expected " + std::to_string(e.size) : "missing from the store") +
                      "; not writing the manifest",
                  "the store lost a write; retry the commit under a new prefix", ErrorCode::kIo);
    }
  }
  Manifest m;
  m.prefix = prefix_;
  m.created_unix = std::time(nullptr);
  m.objects = entries_;
  m.extra = extra.is_null() ? json::object() : extra;
  std::string text = m.to_json();
  std::string key = join_key(prefix_, kManifestName);
  if (store_.put_if_absent(key, text) == PutOutcome::kAlreadyExists) {
    Manifest existing = Manifest::parse(store_.get(key), store_.uri() + "/" + key);
    bool same = existing.objects.size() == m.objects.size();
    for (size_t i = 0; same && i < m.objects.size(); ++i) {
      same = existing.objects[i].name == m.objects[i].name && existing.objects[i].sha256 == m.objects[i].sha256;
    }
    if (!same) {
      throw Error("commit " + store_.uri() + "/" + prefix_ + " already exists with different content",
                  "commit each version under a new prefix (e.g. ckpt/step-000200)", ErrorCode::kInvalidInput);
    }
    m = existing;
  }
  committed_ = true;
  if (latest == LatestPointer::kUpdate) {
    json p = {{"magic", kLatestMagic}, {"version", kManifestVersion}, {"prefix", prefix_}};
    store_.put(join_key(parent_of(prefix_), kLatestName), p.dump() + "\n");
  }
  return m;
}

CommitReader CommitReader::open(ObjectStore& store, const std::string& prefix_in, Verify verify) {
  std::string prefix = prefix_in;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  validate_key(prefix);
  std::string key = join_key(prefix, kManifestName);
  std::string text;
  try {
    text = store.get(key);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kNotFound) throw;
    throw Error(store.uri() + "/" + prefix + " is not a committed version (no " + kManifestName + ")",
                "it may be incomplete (its writer failed) or not exist; list commits with `moerl store ls`",
                ErrorCode::kNotFound);
  }
  Manifest m = Manifest::parse(text, store.uri() + "/" + key);
  // A commit may move as a whole (its names are relative), but a manifest copied into
  // another commit's directory is refused: the last segment (NAME) must match.
  auto last = [](const std::string& p) { return p.substr(p.rfind('/') == std::string::npos ? 0 : p.rfind('/') + 1); };
  if (last(m.prefix) != last(prefix)) {
    throw Error("manifest " + store.uri() + "/" + key + " was written for '" + m.prefix + "', not for a commit named '" +
                    last(prefix) + "'",
                "copy whole commit prefixes (moerl store cp -r), never a manifest alone", ErrorCode::kIo);
  }
  if (verify == Verify::kSizes) {
    for (const auto& e : m.objects) {
      auto h = store.head(join_key(prefix, e.name));
      if (!h || h->size != e.size) {
        throw DamagedCommit("commit " + store.uri() + "/" + prefix + ": shard '" + e.name + "' is " +
                        (h ? std::to_string(h->size) + " bytes, manifest says " + std::to_string(e.size) : "missing"),
                    "the commit was damaged after it was written; use an older commit");
      }
    }
  }
  return CommitReader(store, prefix, std::move(m));
}

std::vector<std::string> list_commits(ObjectStore& store, const std::string& root) {
  std::string base = root.empty() ? "" : root + "/";
  std::vector<std::string> out;
  std::string suffix = std::string("/") + kManifestName;
  for (const auto& o : store.list(base)) {
    if (o.key.size() <= base.size() + suffix.size()) continue;
    if (o.key.compare(o.key.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    std::string name = o.key.substr(base.size(), o.key.size() - base.size() - suffix.size());
    if (name.find('/') == std::string::npos) out.push_back(base + name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<CommitReader> CommitReader::latest(ObjectStore& store, const std::string& root) {
  try {
    json p = json::parse(store.get(join_key(root, kLatestName)));
    if (p.value("magic", "") == kLatestMagic && p.value("version", 0) == kManifestVersion) {
      return open(store, p.at("prefix").get<std::string>());
    }
    MOERL_LOG(WARN) << "store: " << store.uri() << "/" << join_key(root, kLatestName) << " is not a moerl pointer; scanning";
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kNotFound) MOERL_LOG(WARN) << "store: latest pointer unusable (" << e.what() << "); scanning";
  } catch (const json::exception&) {
    MOERL_LOG(WARN) << "store: latest pointer under " << store.uri() << "/" << root << " is not JSON; scanning";
  }
  auto commits = list_commits(store, root);
  for (auto it = commits.rbegin(); it != commits.rend(); ++it) {
    try {
      return open(store, *it);
    } catch (const Error& e) {
      MOERL_LOG(WARN) << "store: skipping " << *it << ": " << e.what();
    }
  }
  return std::nullopt;
}

std::vector<std::string> CommitReader::names() const {
  std::vector<std::string> out;
  for (const auto& e : manifest_.objects) out.push_back(e.name);
  return out;
}

const CommitEntry& CommitReader::entry(const std::string& name) const {
  const CommitEntry* e = manifest_.find(name);
  if (!e) {
    std::string have;
    for (const auto& o : manifest_.objects) have += (have.empty() ? "" : ", ") + o.name;
    throw Error("commit " + store_->uri() + "/" + prefix() + " has no shard '" + name + "'", "it has: " + have,
                ErrorCode::kNotFound);
  }
  return *e;
}

std::string CommitReader::get_bytes(const std::string& name) {
  const CommitEntry& e = entry(name);
  std::string data = store_->get(join_key(prefix(), name));
  if (data.size() != e.size || io::sha256_hex(data) != e.sha256) {
    throw DamagedCommit("commit " + store_->uri() + "/" + prefix() + ": shard '" + name + "' does not match its manifest (size " +
                    std::to_string(data.size()) + " vs " + std::to_string(e.size) + ", or sha256)",
                "the shard was altered after commit; use an older commit");
  }
  return data;
}

void CommitReader::get_file(const std::string& name, const std::string& path) {
  const CommitEntry& e = entry(name);
  store_->get_file(join_key(prefix(), name), path);
  uint64_t size = 0;
  std::string sha = io::sha256_file_hex(path, &size);
  if (size != e.size || sha != e.sha256) {
    ::unlink(path.c_str());
    throw DamagedCommit("commit " + store_->uri() + "/" + prefix() + ": shard '" + name + "' does not match its manifest (size " +
                    std::to_string(size) + " vs " + std::to_string(e.size) + ", or sha256)",
                "the shard was altered after commit; use an older commit");
  }
}

CleanupReport cleanup(ObjectStore& store, const std::string& root, double grace_seconds) {
  CleanupReport report;
  std::string base = root.empty() ? "" : root + "/";
  int64_t cutoff = std::time(nullptr) - static_cast<int64_t>(grace_seconds);
  struct Group {
    std::vector<ObjectInfo> objects;
    bool has_manifest = false;
    int64_t newest = 0;
  };
  std::map<std::string, Group> groups;
  for (auto& o : store.list(base)) {
    std::string rest = o.key.substr(base.size());
    size_t slash = rest.find('/');
    if (slash == std::string::npos) continue;  // ROOT/latest and other top-level objects
    Group& g = groups[base + rest.substr(0, slash)];
    if (rest.substr(slash + 1) == kManifestName) g.has_manifest = true;
    g.newest = std::max(g.newest, o.mtime_unix);
    g.objects.push_back(std::move(o));
  }
  for (auto& [prefix, g] : groups) {
    if (g.newest > cutoff) continue;  // a writer may still be at work
    std::set<std::string> keep;
    if (g.has_manifest) {
      try {
        Manifest m = Manifest::parse(store.get(join_key(prefix, kManifestName)), store.uri() + "/" + prefix);
        for (const auto& e : m.objects) keep.insert(join_key(prefix, e.name));
      } catch (const Error& e) {
        MOERL_LOG(WARN) << "cleanup: leaving " << prefix << " alone: " << e.what();
        continue;
      }
      keep.insert(join_key(prefix, kManifestName));
    }
    for (const auto& o : g.objects) {
      if (keep.count(o.key)) continue;
      store.remove(o.key);
      report.removed_objects.push_back(o.key);
    }
  }
  for (const auto& u : store.list_pending(base)) {
    if (u.initiated_unix > cutoff) continue;
    store.abort_pending(u);
    report.aborted_uploads.push_back(u.key);
  }
  return report;
}

std::vector<std::string> retain_latest(ObjectStore& store, const std::string& root, size_t keep,
                                       const std::set<std::string>& pinned) {
  auto commits = list_commits(store, root);
  std::string pointed;
  try {
    pointed = json::parse(store.get(join_key(root, kLatestName))).value("prefix", "");
  } catch (const std::exception&) {
  }
  std::vector<std::string> removed;
  if (commits.size() <= keep) return removed;
  for (size_t i = 0; i + keep < commits.size(); ++i) {
    const std::string& p = commits[i];
    if (p == pointed || pinned.count(p)) continue;
    store.remove(join_key(p, kManifestName));  // first: the commit disappears atomically
    for (const auto& o : store.list(p + "/")) store.remove(o.key);
    removed.push_back(p);
  }
  return removed;
}

}  // namespace moerl::store
