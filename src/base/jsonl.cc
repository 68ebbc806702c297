// JSON Lines writer (one write(2) per line on an O_APPEND fd) and whole-file reader.
#include "base/jsonl.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace moerl::metrics {

JsonlWriter::JsonlWriter(std::string path, JsonlMode mode, JsonlSync sync)
    : path_(std::move(path)), sync_(sync) {
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  if (mode == JsonlMode::kTruncate) flags |= O_TRUNC;
  fd_ = ::open(path_.c_str(), flags, 0644);
  if (fd_ < 0) {
    throw Error("cannot open '" + path_ + "' for appending: " + std::strerror(errno),
                "check that the directory exists and is writable", ErrorCode::kIo);
  }
}

JsonlWriter::~JsonlWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void JsonlWriter::write(const nlohmann::json& row) {
  // NOTE: dump() writes NaN/Inf as null; replace invalid UTF-8 rather than throw mid-run.
  std::string line = row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(fd_, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error("write to '" + path_ + "' failed: " + std::strerror(errno),
                  "check free disk space and that the file system is writable", ErrorCode::kIo);
    }
    off += static_cast<size_t>(n);
  }
  if (sync_ == JsonlSync::kFsync && ::fsync(fd_) != 0) {
    throw Error("fsync of '" + path_ + "' failed: " + std::strerror(errno),
                "check the file system holding the run directory", ErrorCode::kIo);
  }
  ++lines_;
}

int64_t JsonlWriter::lines_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lines_;
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("cannot read '" + path + "': " + std::strerror(errno),
                "give the path of a JSON Lines file, e.g. RUN_DIR/metrics.jsonl",
                ErrorCode::kNotFound);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<nlohmann::json> rows;
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    bool complete = nl != std::string::npos;
    std::string line = text.substr(pos, complete ? nl - pos : std::string::npos);
    pos = complete ? nl + 1 : text.size();
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded()) {
      if (!complete) break;  // torn last line of a writer that died mid-write
      throw Error(path + ":" + std::to_string(line_no) + ": not valid JSON: '" +
                      line.substr(0, 80) + (line.size() > 80 ? "..." : "") + "'",
                  "each line must be one JSON object, e.g. {\"step\": 1, \"reward\": 0.5}");
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace moerl::metrics
