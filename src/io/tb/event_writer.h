// TensorBoard event files: each event is an Event protobuf (io/tb/tb_event.proto, TensorBoard's
// field numbers) in TFRecord framing (uint64 length, masked CRC-32C of the length, the bytes,
// masked CRC-32C of the bytes); the first event names the file version "brain.Event:2".
// Spec: docs/formats/tensorboard.md.
//
//   tb::EventWriter w(run_dir + "/tb");   // dir/events.out.tfevents.<unix seconds>.<host>
//   w.add_scalars(step, {{"rl/reward", 0.42}, {"rl/loss", 1.7}});
// Each call appends whole records with one write(2) (readers never see half a record from a
// live writer); nothing is buffered. Not thread-safe: one owner.
// Failure: the directory or file cannot be created or written -> moerl::Error(kIo) naming it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moerl::tb {

inline constexpr const char* kFileVersion = "brain.Event:2";

// TFRecord's masked CRC-32C: rotate right by 15 bits, add 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);
// One record: the framing around `payload`.
std::string frame_record(std::string_view payload);

class EventWriter {
 public:
  // wall_time: seconds since the epoch for the file name and the version event (0 = now).
  explicit EventWriter(const std::string& dir, double wall_time = 0);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // One Event with one Summary holding every (tag, value); values are stored as float32
  // (Summary.Value.simple_value). wall_time 0 = now.
  void add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values, double wall_time = 0);
  const std::string& path() const { return path_; }

 private:
  void append(std::string_view bytes);

  std::string path_;
  int fd_ = -1;
};

}  // namespace moerl::tb
