// TOML job configs: load a file, apply `--set a.b=value` overrides, and read typed
// fields with validation. Every error names the full key, the value seen and what is
// accepted. Readers call done() last, which rejects keys nobody asked for (typos).
//
//   ConfigDoc doc = ConfigDoc::load("job.toml", {"train.lr=1e-4"});
//   ConfigTable train = doc.root().table("train");
//   double lr = train.number("lr", 3e-4, {.min = 0, .max = 1});
//   std::string mode = train.choice("mode", "sync", {"sync", "async"});
//   train.done();
// Not thread-safe; a ConfigDoc is built once at startup.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace toml {
inline namespace v3 {
class table;
class node;
}  // namespace v3
}  // namespace toml

namespace moerl {

struct Range {
  double min = -1e300;
  double max = 1e300;
  const char* hint = nullptr;  // the error's hint when the value is outside; null: a generic one
};

class ConfigTable {
 public:
  ConfigTable(std::shared_ptr<toml::table> root, toml::table* table, std::string path);

  bool has(const std::string& key) const;
  double number(const std::string& key, double fallback, Range range = {});
  int64_t integer(const std::string& key, int64_t fallback, Range range = {});
  bool boolean(const std::string& key, bool fallback);
  std::string string(const std::string& key, const std::string& fallback);
  std::string choice(const std::string& key, const std::string& fallback,
                     const std::vector<std::string>& accepted);
  std::vector<int64_t> integers(const std::string& key, const std::vector<int64_t>& fallback);
  std::vector<std::string> strings(const std::string& key, const std::vector<std::string>& fallback);
  // Required variants: missing key is an error naming it.
  std::string required_string(const std::string& key);
  // Sub-table; an absent one reads as empty (all defaults).
  ConfigTable table(const std::string& key);
  std::vector<std::string> keys() const;
  // Rejects keys that were never read, listing the accepted ones.
  void done();
  const std::string& path() const { return path_; }

 private:
  const toml::node* lookup(const std::string& key);
  std::string full(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& what,
                         const std::string& hint) const;

  std::shared_ptr<toml::table> root_;
  toml::table* table_;  // may be null for an absent table
  std::string path_;
  std::set<std::string> read_;
};

class ConfigDoc {
 public:
  static ConfigDoc load(const std::string& file, const std::vector<std::string>& overrides = {});
  static ConfigDoc parse(const std::string& text, const std::string& source_name,
                         const std::vector<std::string>& overrides = {});
  ConfigTable root();
  std::string to_toml() const;  // the effective config, overrides applied
  const std::string& source() const { return source_; }

 private:
  std::shared_ptr<toml::table> table_;
  std::string source_;
};

}  // namespace moerl
