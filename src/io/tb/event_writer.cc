// TFRecord framing and Event encoding through the generated protobuf classes.
#include "io/tb/event_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "io/checksum.h"
#include "io/tb/tb_event.pb.h"

namespace moerl::tb {
namespace {

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = io::crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string frame_record(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 16);
  put_le(out, payload.size(), 8);
  put_le(out, masked_crc32c(out.data(), 8), 4);
  out.append(payload);
  put_le(out, masked_crc32c(payload.data(), payload.size()), 4);
  return out;
}

EventWriter::EventWriter(const std::string& dir, double wall_time) {
  if (wall_time <= 0) wall_time = now_unix();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  path_ = (std::filesystem::path(dir) /
           ("events.out.tfevents." + std::to_string(static_cast<int64_t>(wall_time)) + "." + host_name()))
              .string();
  // NOTE: append, not truncate: a second writer in the same second (a quick restart) adds its
  // records after the first's; TFRecord records are self-delimiting.
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw Error("tensorboard: cannot create " + path_ + ": " + std::strerror(errno),
                "check that the run directory is writable ([metrics] tensorboard = true writes RUN_DIR/tb/)",
                ErrorCode::kIo);
  }
  Event e;
  e.set_wall_time(wall_time);
  e.set_file_version(kFileVersion);
  append(frame_record(e.SerializeAsString()));
}

EventWriter::~EventWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void EventWriter::add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values,
                              double wall_time) {
  Event e;
  e.set_wall_time(wall_time > 0 ? wall_time : now_unix());
  e.set_step(step);
  Summary* s = e.mutable_summary();
  for (const auto& [tag, v] : values) {
    Summary::Value* sv = s->add_value();
    sv->set_tag(tag);
    sv->set_simple_value(static_cast<float>(v));
  }
  append(frame_record(e.SerializeAsString()));
}

void EventWriter::append(std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error("tensorboard: cannot write " + path_ + ": " + std::strerror(errno),
                  "check free space in the run directory", ErrorCode::kIo);
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace moerl::tb
