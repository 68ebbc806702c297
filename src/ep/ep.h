// Expert-parallel (EP) dispatch/combine, DeepEP-shaped. The model's MoE block talks only
// to this interface; which transport runs underneath (loopback, fabric, alltoall
// baseline, cuda_ipc) is chosen when the Group is created.
//
// Legend: T tokens on this rank, H hidden, K top-k, E global experts, R ranks,
//         N tokens received by this rank (each source token counted once per rank).
//
//   std::shared_ptr<ep::Group> g = ep::make_group(cfg);      // or ep::loopback_group(E)
//   ep::Layout layout = g->get_dispatch_layout(topk_idx_TK, E);
//   ep::Dispatched d = g->dispatch(x_TH, topk_idx_TK, topk_weights_TK, layout);
//   // run local experts on d.recv_x_NH using d.recv_topk_idx_NK (local ids, -1 = not here)
//   at::Tensor y_TH = g->combine(expert_out_NH, d.handle);
//
// Autograd (ep/autograd.h): ep::dispatch_autograd / ep::combine_autograd wrap the calls
// so that dispatch backward is a combine and combine backward is a dispatch.
//
// Thread-safety: a Group is used by one thread at a time. Collective: every rank must
// make the same sequence of dispatch/combine calls. Failures (dead peer, timeout) throw
// moerl::Error naming rank, peer and what was missing.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moerl::ep {

enum class Mode {
  kNormal,      // high-throughput: count handshake, exact-size receive
  kLowLatency,  // decode: fixed per-(local expert, source rank) slots, no size negotiation
};

struct Layout {
  at::Tensor num_tokens_per_rank;    // [R] int64
  at::Tensor num_tokens_per_expert;  // [E] int64
  at::Tensor is_token_in_rank;       // [T,R] bool
};

// What a dispatch leaves behind for combine and for autograd (cached mode reuses it).
struct Handle {
  std::shared_ptr<void> state;  // transport-specific; opaque to callers
  int64_t num_tokens = 0;       // T at the source
  int64_t num_recv = 0;         // N at this rank
};

// Row order of recv_*: normal mode, by source rank then source token (one row per token
// and destination rank). Low-latency mode, one row per (token, local expert), grouped by
// local expert then source rank then token (num_recv_tokens_per_expert gives the group
// sizes; only the top-k slots naming that expert are set). Low-latency fixes the slots
// on the wire (per source, sized by max_tokens_per_rank, no size negotiation); the
// returned tensors are compact (no empty rows). Rows whose recv_topk_idx is all -1 would
// be skipped by experts; combine sums every row it is given back into its source token.
struct Dispatched {
  at::Tensor recv_x_NH;
  at::Tensor recv_topk_idx_NK;      // int64, local expert ids in [0, E/R) or -1
  at::Tensor recv_topk_weights_NK;  // float32, 0 where recv_topk_idx is -1
  std::vector<int64_t> num_recv_tokens_per_expert;  // [E/R]
  Handle handle;
};

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int64_t num_experts() const = 0;
  int64_t num_local_experts() const { return num_experts() / world_size(); }

  // Pure function of topk_idx; no communication.
  virtual Layout get_dispatch_layout(const at::Tensor& topk_idx_TK, int64_t num_experts) = 0;
  // Sends each token once to every rank holding one of its experts. With `cached`, the
  // layout and count exchange are skipped and the previous routing is reused: topk_idx,
  // topk_weights and layout may be undefined/empty, only x_TH is sent, and recv_topk_*
  // are those of the dispatch that made the handle.
  virtual Dispatched dispatch(const at::Tensor& x_TH, const at::Tensor& topk_idx_TK,
                              const at::Tensor& topk_weights_TK, const Layout& layout,
                              const Handle* cached = nullptr) = 0;
  // Returns [T,H] at the source: for each source token, the sum of the y_NH rows that
  // the ranks it was sent to return. Unweighted: the top-k weights are applied by the
  // experts on the receiving rank (y = sum_k w_k * expert_k(x)), as in DeepEP.
  virtual at::Tensor combine(const at::Tensor& y_NH, const Handle& handle) = 0;
};

// One rank, no transport: dispatch returns the input in place (a view where possible).
// Mode is ignored: one rank has nothing to negotiate.
std::shared_ptr<Group> loopback_group(int64_t num_experts);

enum class Backend {
  kLoopback,  // one rank, no transport
  kFabric,    // libfabric RDM (shm, tcp, efa): tagged messages into one registered buffer
  kAllToAll,  // baseline: permute + count exchange + all-to-all-v over c10d Gloo + unpermute
  kCudaIpc,   // GPUs of one node: rows written into peers' mapped buffers (ep/cuda)
  kNccl,      // GPU baseline: the all-to-all path over c10d NCCL (ep/cuda)
  kHierarchical,  // nodes of LOCAL_WORLD_SIZE ranks: an intra-node group and an inter-node group
                  // (ep/hier): one inter-node hop per (token, node), then forwarded on the node
};

// Validated in one place (validate()); presets are the defaults below.
struct Config {
  Backend backend = Backend::kLoopback;
  Mode mode = Mode::kNormal;
  std::string provider;               // libfabric provider; empty: FI_PROVIDER, else "shm"
  int64_t max_tokens_per_rank = 4096; // bound on T per dispatch (buffers are sized to it)
  int64_t hidden = 7168;              // bound on H (row width) the buffers are sized for
  int64_t max_topk = 8;               // bound on K
  double timeout_s = 60;              // every wait on a peer ends with an Error after this
  // backend hierarchical only (ep/hier/hier_group.h): the backends of its two hops, each
  // one of fabric|alltoall|cuda_ipc|nccl. intra: nullopt = cuda_ipc where a GPU build
  // registered it, else fabric; inter: fabric.
  std::optional<Backend> intra_backend;
  Backend inter_backend = Backend::kFabric;
  std::string intra_provider = "shm";  // intra fabric's libfabric provider
  std::string inter_provider;          // inter fabric's provider; empty: `provider`, else "tcp"
  // Throws moerl::Error naming every value involved.
  void validate(int64_t num_experts, int world_size) const;
};

Backend parse_backend(const std::string& s);  // "loopback" | "fabric" | "alltoall" | "cuda_ipc" | "nccl" | "hierarchical"
Mode parse_mode(const std::string& s);        // "normal" | "low_latency" (or "low-latency")
const char* backend_name(Backend b);
const char* mode_name(Mode m);

// Creates the group for this process. For fabric/alltoall/hierarchical: rendezvous through a c10d
// TCPStore at MASTER_ADDR:MASTER_PORT with WORLD_SIZE/RANK (base/env.h); collective, so
// every rank must call it. loopback needs no environment.
std::shared_ptr<Group> make_group(const Config& cfg, int64_t num_experts);

// Backends built outside this library (the GPU ones, cuda_ipc and nccl) register their
// factory when a job or command uses the GPU (job/gpu_paths.cc); make_group then creates them like the others.
using GroupFactory = std::shared_ptr<Group> (*)(const Config& cfg, int64_t num_experts);
void register_backend(Backend b, GroupFactory factory);

}  // namespace moerl::ep
