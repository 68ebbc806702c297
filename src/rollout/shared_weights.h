// Policy versions handed from a trainer process to rollout worker processes on the same host
// through shared memory ([runtime] weight_transport = "shared"): the trainer copies its
// parameters (device to host, once) into one of two memory-mapped files in a directory
// (default /dev/shm) and announces "shared:<file>#v<version>"; a worker maps the file and
// copies the tensors out. No safetensors file, sha256, store commit or download sits between
// a training step and the workers (through the store, a 1.9B-parameter version took 12 s of
// the trainer's step on the H100 run of docs/perf.md).
//
//   SharedWeightsWriter w("/dev/shm", "moerl");                 // trainer
//   registry.publish(v, w.put(v, policy), d);
//   SharedWeights s = read_shared_weights(location, wanted);    // worker (another process)
//   model.load_weights(s.params);
//
// A file holds the config (HF config.json text), a tensor table and the bytes, under a
// sequence counter that is odd while the trainer writes. Version v goes to file v % 2, so a
// file is rewritten only two versions later; a reader checks the counter and the version
// before and after its copy, and a torn or replaced read is an Error (kNotFound: stage the
// newest version instead), never silently mixed weights. The writer is not thread-safe;
// readers are independent.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "io/hf_config.h"
#include "model/model.h"

namespace moerl::rollout {

// True for a location SharedWeightsWriter::put returned.
bool is_shared_location(const std::string& location);

class SharedWeightsWriter {
 public:
  // Files DIR/moerl-weights-<tag>-{0,1}; `tag` keeps runs sharing a host apart (the runtime
  // namespace and a hash of the run's store). Errors: DIR missing or not writable.
  SharedWeightsWriter(std::string dir, std::string tag);
  ~SharedWeightsWriter();  // removes the files
  SharedWeightsWriter(const SharedWeightsWriter&) = delete;
  SharedWeightsWriter& operator=(const SharedWeightsWriter&) = delete;

  // Writes `policy`'s parameters and buffers as `version`; returns the location to announce.
  // Errors: the directory cannot hold the file (a clear message with the size needed).
  // Each file stays mapped between versions and, where the build can (model/host_pinning.h),
  // page-locked, so GPU parameters arrive by DMA at full link speed; a file removed or
  // resized under the writer is made anew.
  std::string put(uint64_t version, const model::Model& policy);
  // Whether the last put() copied into page-locked memory.
  bool pinned() const { return pinned_; }

 private:
  struct Slot;
  Slot& slot(int index, const std::string& path, uint64_t size);

  std::string dir_, tag_;
  std::unique_ptr<Slot> slots_[2];
  bool pinned_ = false;
};

struct SharedWeights {
  uint64_t version = 0;
  io::HfConfig config;
  model::Params params;  // host tensors in the trainer's dtype, owned (copied out of the file)
};

// Reads the version at `location`; `wanted` (null: all) selects tensors by name. Errors:
// kNotFound when the file was replaced by a newer version or is being rewritten (take the
// newest), kIo for a missing or malformed file.
SharedWeights read_shared_weights(const std::string& location,
                                  const std::function<bool(const std::string&)>& wanted = {});

}  // namespace moerl::rollout
