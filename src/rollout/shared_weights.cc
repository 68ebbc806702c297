// Weight versions through memory-mapped files on one host (see the header for the protocol).
#include "rollout/shared_weights.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/host_pinning.h"
#include "model/thread_stream.h"

namespace moerl::rollout {

namespace {

constexpr char kScheme[] = "shared:";
constexpr char kMagic[8] = {'M', 'O', 'E', 'R', 'L', 'S', 'W', '1'};
constexpr uint64_t kMetaAt = 64, kAlign = 64, kPage = 4096;

// The file's fixed header; the tensor table (JSON) follows at kMetaAt, the bytes at data_at.
struct Header {
  char magic[8];
  uint64_t seq;      // odd while a writer is inside
  uint64_t version;
  uint64_t meta_len;
  uint64_t data_at;
  uint64_t size;
};
static_assert(sizeof(Header) <= kMetaAt);

uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

std::string sys_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// An mmap of a whole file, unmapped and closed on scope exit.
class Mapping {
 public:
  Mapping(const std::string& path, bool write, uint64_t size) : size_(size) {
    fd_ = ::open(path.c_str(), write ? O_RDWR : O_RDONLY);
    if (fd_ < 0) throw Error(sys_error("shared weights: cannot open", path), "", ErrorCode::kIo);
    if (!write) {
      struct stat st {};
      if (::fstat(fd_, &st) != 0 || st.st_size < static_cast<off_t>(kMetaAt)) {
        ::close(fd_);
        throw Error("shared weights: " + path + " is too short to hold a version", "", ErrorCode::kIo);
      }
      size_ = static_cast<uint64_t>(st.st_size);
    }
    struct stat st {};
    if (::fstat(fd_, &st) == 0) inode_ = st.st_ino;
    void* p = ::mmap(nullptr, size_, write ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
      ::close(fd_);
      throw Error(sys_error("shared weights: cannot map", path), "", ErrorCode::kIo);
    }
    base_ = static_cast<char*>(p);
  }
  ~Mapping() {
    ::munmap(base_, size_);
    ::close(fd_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  char* base() const { return base_; }
  uint64_t size() const { return size_; }
  Header* header() const { return reinterpret_cast<Header*>(base_); }
  // Whether `path` still names this mapping's file at `size` bytes (not removed or replaced).
  bool still(const std::string& path, uint64_t size) const {
    struct stat st {};
    return size == size_ && ::stat(path.c_str(), &st) == 0 && st.st_ino == inode_ && static_cast<uint64_t>(st.st_size) == size;
  }

 private:
  ino_t inode_ = 0;
  int fd_ = -1;
  char* base_ = nullptr;
  uint64_t size_ = 0;
};

uint64_t load_seq(const Header* h) { return __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE); }

// A file of exactly `size` bytes at `path`, its space reserved (a full tmpfs fails here, not
// as SIGBUS later). A file of another size is replaced, not shrunk: a reader still mapping
// the old one keeps its pages.
void prepare_file(const std::string& path, uint64_t size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) != size) ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
  if (fd < 0) {
    throw Error(sys_error("shared weights: cannot create", path),
                "set [runtime] shared_weights_dir to a writable directory on this host", ErrorCode::kIo);
  }
  const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
  ::close(fd);
  if (rc != 0) {
    throw Error("shared weights: cannot reserve " + std::to_string(size >> 20) + " MiB for " + path + ": " +
                    std::strerror(rc),
                "give [runtime] shared_weights_dir room for two copies of the weights (a container's /dev/shm "
                "is often 64 MiB: mount a larger one or use a directory on disk)",
                ErrorCode::kIo);
  }
}

struct Location {
  std::string path;
  uint64_t version = 0;
};

Location parse_location(const std::string& location) {
  const size_t hash = location.rfind("#v");
  Location l;
  try {
    if (!is_shared_location(location) || hash == std::string::npos) throw std::invalid_argument("form");
    l.path = location.substr(std::strlen(kScheme), hash - std::strlen(kScheme));
    l.version = std::stoull(location.substr(hash + 2));
  } catch (const std::exception&) {
    throw Error("shared weights: '" + location + "' is not a location of the form shared:<file>#v<version>", "",
                ErrorCode::kInvalidInput);
  }
  return l;
}

}  // namespace

// A file kept mapped (and page-locked where the build can) from one version to the next.
struct SharedWeightsWriter::Slot {
  Slot(const std::string& path, uint64_t size) : map(path, /*write=*/true, size) {
    pinned = model::pin_host_memory(map.base(), map.size());
  }
  ~Slot() {
    if (pinned) model::unpin_host_memory(map.base());
  }
  Mapping map;
  bool pinned = false;
};

SharedWeightsWriter::Slot& SharedWeightsWriter::slot(int index, const std::string& path, uint64_t size) {
  std::unique_ptr<Slot>& s = slots_[index];
  if (s && s->map.still(path, size)) return *s;
  s.reset();
  prepare_file(path, size);
  s = std::make_unique<Slot>(path, size);
  return *s;
}

bool is_shared_location(const std::string& location) { return location.rfind(kScheme, 0) == 0; }

SharedWeightsWriter::SharedWeightsWriter(std::string dir, std::string tag) : dir_(std::move(dir)), tag_(std::move(tag)) {
  if (::access(dir_.c_str(), W_OK) != 0) {
    throw Error(sys_error("shared weights: directory not writable:", dir_),
                "set [runtime] shared_weights_dir to a writable directory on this host", ErrorCode::kInvalidInput);
  }
}

// The files hold two copies of the weights in memory (under /dev/shm): gone with the trainer.
// A reader that mapped one keeps its pages; a later open fails, and the worker waits for the
// next trainer's versions. A trainer that crashes leaves them until its run's next trainer
// rewrites them.
SharedWeightsWriter::~SharedWeightsWriter() {
  for (auto& s : slots_) s.reset();
  for (int slot = 0; slot < 2; ++slot) ::unlink((dir_ + "/moerl-weights-" + tag_ + "-" + std::to_string(slot)).c_str());
}

std::string SharedWeightsWriter::put(uint64_t version, const model::Model& policy) {
  const model::Params state = policy.state();
  nlohmann::json table = nlohmann::json::array();
  std::vector<uint64_t> offsets;  // of each tensor in `state` order, from the data start
  uint64_t offset = 0;
  for (const auto& [name, t] : state) {
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    table.push_back({name, static_cast<int>(t.scalar_type()), t.sizes().vec(), offset, bytes});
    offsets.push_back(offset);
    offset += round_up(bytes, kAlign);
  }
  const std::string meta = nlohmann::json{{"config", policy.config().to_json()}, {"tensors", table}}.dump();
  const uint64_t data_at = round_up(kMetaAt + meta.size(), kPage), size = data_at + offset;
  const std::string path = dir_ + "/moerl-weights-" + tag_ + "-" + std::to_string(version % 2);
  Slot& sl = slot(static_cast<int>(version % 2), path, size);
  const Mapping& m = sl.map;
  Header* h = m.header();
  const uint64_t seq = load_seq(h);
  __atomic_store_n(&h->seq, seq | 1, __ATOMIC_RELEASE);  // odd: readers back off
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  std::memcpy(h->magic, kMagic, sizeof kMagic);
  h->meta_len = meta.size();
  h->data_at = data_at;
  h->size = size;
  std::memcpy(m.base() + kMetaAt, meta.data(), meta.size());
  {
    at::NoGradGuard no_grad;
    size_t i = 0;
    at::Device device = at::kCPU;
    for (const auto& [name, t] : state) {
      // Into page-locked memory a GPU tensor's copy is a DMA queued on the stream: all of them
      // are queued, then waited for once, before the version is marked complete.
      const bool async = sl.pinned && t.is_cuda();
      if (async) device = t.device();
      at::from_blob(m.base() + data_at + offsets[i++], t.sizes(), at::TensorOptions().dtype(t.scalar_type()))
          .copy_(t, /*non_blocking=*/async);
    }
    model::synchronize_stream(device);
  }
  pinned_ = sl.pinned;
  h->version = version;
  __atomic_store_n(&h->seq, (seq | 1) + 1, __ATOMIC_RELEASE);  // even: complete
  return kScheme + path + "#v" + std::to_string(version);
}

SharedWeights read_shared_weights(const std::string& location, const std::function<bool(const std::string&)>& wanted) {
  const Location l = parse_location(location);
  Mapping m(l.path, /*write=*/false, 0);
  const Header* h = m.header();
  const uint64_t seq = load_seq(h);
  auto replaced = [&](const std::string& why) {
    return Error("shared weights: version " + std::to_string(l.version) + " at " + l.path + " " + why,
                 "a newer version replaced it: stage the newest", ErrorCode::kNotFound);
  };
  if (seq % 2 == 1) throw replaced("is being rewritten");
  if (std::memcmp(h->magic, kMagic, sizeof kMagic) != 0 || h->size != m.size() || h->data_at > h->size ||
      kMetaAt + h->meta_len > h->data_at) {
    throw Error("shared weights: " + l.path + " is not a weights file (bad magic or sizes)",
                "the file is damaged or another program's: remove it; the trainer rewrites it", ErrorCode::kIo);
  }
  if (h->version != l.version) throw replaced("was replaced by version " + std::to_string(h->version));
  const nlohmann::json meta =
      nlohmann::json::parse(std::string(m.base() + kMetaAt, h->meta_len), nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded() || !meta.contains("config") || !meta.contains("tensors")) {
    throw Error("shared weights: " + l.path + " holds no readable tensor table", "", ErrorCode::kIo);
  }
  SharedWeights out;
  out.version = l.version;
  out.config = io::HfConfig::parse(meta["config"].get<std::string>(), l.path);
  const uint64_t data_bytes = h->size - h->data_at;
  for (const auto& row : meta["tensors"]) {
    const std::string name = row.at(0).get<std::string>();
    if (wanted && !wanted(name)) continue;
    const int code = row.at(1).get<int>();
    if (code < 0 || code >= static_cast<int>(at::ScalarType::NumOptions)) {
      throw Error("shared weights: " + l.path + ": tensor " + name + " has an unknown dtype code " + std::to_string(code),
                  "the file is damaged or from another moerl build: remove it; the trainer rewrites it", ErrorCode::kIo);
    }
    const auto dtype = static_cast<at::ScalarType>(code);
    const std::vector<int64_t> shape = row.at(2).get<std::vector<int64_t>>();
    const uint64_t off = row.at(3).get<uint64_t>(), bytes = row.at(4).get<uint64_t>();
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    if (off > data_bytes || bytes > data_bytes - off ||
        static_cast<uint64_t>(numel) * at::elementSize(dtype) != bytes) {
      throw Error("shared weights: " + l.path + ": tensor " + name + " lies outside the file or has the wrong size",
                  "the file is damaged: remove it; the trainer rewrites it", ErrorCode::kIo);
    }
    out.params.emplace(name,
                       at::from_blob(m.base() + h->data_at + off, shape, at::TensorOptions().dtype(dtype)).clone());
  }
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  if (load_seq(h) != seq) throw replaced("was rewritten while it was read");
  return out;
}

}  // namespace moerl::rollout
