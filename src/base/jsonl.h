// JSON Lines files (metrics.jsonl and the like): a writer that appends one compact JSON
// object per line, and a reader that parses a whole file back.
//
//   metrics::JsonlWriter out(run_dir + "/metrics.jsonl");   // appends; creates the file
//   out.write({{"step", 3}, {"reward", 0.42}, {"loss", 1.7}});
//   std::vector<nlohmann::json> rows = metrics::read_jsonl(run_dir + "/metrics.jsonl");
//
// Thread-safety: JsonlWriter::write may be called from any thread; each line goes out in
// one write(2) on an O_APPEND descriptor, so lines from several threads (or processes
// appending to the same file) never interleave. Each line is on the OS side when write()
// returns; with JsonlSync::kFsync it is also on disk.
// Failure: open/write/fsync errors throw moerl::Error(kIo) naming the path; read_jsonl
// throws Error(kInvalidInput) naming the path and 1-based line of a malformed line.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moerl::metrics {

enum class JsonlMode { kAppend, kTruncate };
enum class JsonlSync { kNone, kFsync };  // kFsync: fsync(2) after every line

class JsonlWriter {
 public:
  explicit JsonlWriter(std::string path, JsonlMode mode = JsonlMode::kAppend,
                       JsonlSync sync = JsonlSync::kNone);
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;

  // Writes `row` as one line. Non-finite numbers are written as null (JSON has no NaN).
  void write(const nlohmann::json& row);
  const std::string& path() const { return path_; }
  int64_t lines_written() const;

 private:
  std::string path_;
  JsonlSync sync_;
  int fd_ = -1;
  mutable std::mutex mu_;
  int64_t lines_ = 0;  // guarded by mu_
};

// Parses every non-blank line; a final line without '\n' (a writer killed mid-line) is
// skipped when it does not parse, since only that line can be torn.
std::vector<nlohmann::json> read_jsonl(const std::string& path);

}  // namespace moerl::metrics
