// cuda_ipc Group: each rank maps every peer's device buffer once. A dispatch or combine writes
// rows (and a new plan's counts and top-k metadata) straight into the peers' buffers and raises
// their flags; each rank's stream then waits on its own flags on the GPU, as DeepEP's intranode
// kernels do (ep/cuda/ipc_flags.h; from the host where ranks share a GPU). No store round trip or barrier sits on the path: a new
// plan's one host sync reads the received counts (they size the output); a cached dispatch and
// a combine have none. The send plan is built on the GPU (ep/torch/ipc_plan.h); input checks
// and the Dispatched result are RoutedGroup's (ep/torch/routed.h); regions are sized by
// ep/buffer_layout.h.
//
// One buffer per rank: flags (ep/cuda/ipc_flags.h) | rows (dispatch half, combine half: a
// region per source) | metadata (a slot per source: rows, per-local-expert counts, K ids and K
// weights per row).
#include "ep/cuda/cuda_ipc_group.h"

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "ep/buffer_layout.h"
#include "ep/cuda/ipc_flags.h"
#include "ep/cuda/kernels.h"
#include "ep/cuda/ops.h"
#include "ep/cuda/peer_pack.h"
#include "ep/torch/ipc_plan.h"
#include "ep/torch/routed.h"
#include "ep/torch/tensors.h"
#include "ep/torch/world.h"

namespace moerl::ep {
namespace {

using Flags = cuda::IpcFlags;
using detail::IpcState;
using detail::RoutedState;

std::vector<uint8_t> to_bytes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

class CudaIpcGroup final : public detail::RoutedGroup {
 public:
  CudaIpcGroup(const Config& cfg, int64_t num_experts, detail::World w)
      : RoutedGroup("cuda_ipc", cfg, num_experts, w.rank, w.world_size,
                    BufferLayout::make(cfg, num_experts, w.world_size, BufferLayout::Meta::kSeparate)),
        store_(w.store),
        max_rows_(buffers_->max_rows),
        region_bytes_(buffers_->region_bytes),
        experts_per_rank_(num_experts / w.world_size),
        header_len_(1 + experts_per_rank_),
        flags_bytes_(cuda::IpcFlags::bytes(w.world_size)),
        meta_offset_(flags_bytes_ + buffers_->total_bytes),
        meta_slot_bytes_(align_up(header_len_ * 8 + buffers_->max_rows * buffers_->max_topk * 8, 256)) {
    int device = 0;
    cuda::ipc_check(cudaGetDevice(&device), rank_, "cudaGetDevice");
    const size_t total = meta_offset_ + num_ranks_ * meta_slot_bytes_;
    cuda::ipc_check(cudaMalloc(&base_, total), rank_, "cudaMalloc of the receive buffers");
    cuda::ipc_check(cudaMemset(base_, 0, flags_bytes_), rank_, "zeroing the flags");
    cuda::ipc_check(cudaHostAlloc(reinterpret_cast<void**>(&headers_), (num_ranks_ * (header_len_ + 1) + 1) * 8,
                             cudaHostAllocDefault),
               rank_, "cudaHostAlloc of the count buffer");
    cuda::ipc_check(cudaDeviceSynchronize(), rank_, "zeroing the flags");
    // Published with the handle: the GPU's UUID, to tell which peers share this GPU.
    cudaIpcMemHandle_t h;
    cuda::ipc_check(cudaIpcGetMemHandle(&h, base_), rank_, "cudaIpcGetMemHandle");
    cudaDeviceProp prop;
    cuda::ipc_check(cudaGetDeviceProperties(&prop, device), rank_, "cudaGetDeviceProperties");
    std::vector<uint8_t> mine = to_bytes(&h, sizeof(h)), uuid = to_bytes(&prop.uuid, sizeof(prop.uuid));
    mine.insert(mine.end(), uuid.begin(), uuid.end());
    store_->set("handle/" + std::to_string(rank_), mine);
    peers_.assign(num_ranks_, nullptr);
    bool shares_gpu = false;
    for (int s = 0; s < num_ranks_; ++s) {
      if (s == rank_) {
        peers_[s] = static_cast<uint8_t*>(base_);
        continue;
      }
      std::vector<uint8_t> b = get("handle/" + std::to_string(s), s);
      cudaIpcMemHandle_t ph;
      std::memcpy(&ph, b.data(), sizeof(ph));
      shares_gpu = shares_gpu || std::equal(uuid.begin(), uuid.end(), b.begin() + sizeof(ph));
      void* p = nullptr;
      cuda::ipc_check(cudaIpcOpenMemHandle(&p, ph, cudaIpcMemLazyEnablePeerAccess), rank_,
                 "cudaIpcOpenMemHandle of rank " + std::to_string(s));
      peers_[s] = static_cast<uint8_t*>(p);
    }
    flags_ = std::make_unique<cuda::IpcFlags>(rank_, peers_, host_polled_waits(shares_gpu), cfg_.timeout_s);
    barrier("mapped");  // every rank's flags are zero before anyone signals
  }

  ~CudaIpcGroup() override {
    try {
      cudaStreamSynchronize(stream());
      barrier("closing");  // no peer writes into our buffers after this
    } catch (...) {
    }
    for (int s = 0; s < num_ranks_; ++s)
      if (s != rank_ && peers_[s]) cudaIpcCloseMemHandle(peers_[s]);
    if (base_) cudaFree(base_);
    if (headers_) cudaFreeHost(headers_);
  }

  Layout get_dispatch_layout(const at::Tensor& topk_idx_TK, int64_t num_experts) override {
    detail::check_num_experts(num_experts, num_experts_);
    if (topk_idx_TK.is_cuda()) return cuda::compute_layout(topk_idx_TK, num_experts, num_ranks_);
    return detail::compute_layout(topk_idx_TK, num_experts, num_ranks_);
  }

 protected:
  // The send plan on the GPU, without a host sync (ep/torch/ipc_plan.h).
  std::shared_ptr<RoutedState> plan(const detail::DispatchInputs& in, const Layout&) override {
    const at::Device dev = in.x_TH.device();
    auto st = detail::ipc_plan(in.topk_idx_TK.to(dev), in.topk_weights_TK.to(dev), num_experts_, num_ranks_,
                               cfg_.mode, max_rows_);
    st->group = this;
    return st;
  }

  at::Tensor dispatch_rows(const at::Tensor& x, const std::shared_ptr<RoutedState>& sp, Meta meta) override {
    IpcState& st = ipc_state(*sp);
    const bool fresh = meta == Meta::kExchange;
    const int64_t H = x.size(1), row_bytes = H * x.element_size();
    const uint64_t op = ++dispatches_;
    check_error();
    wait(Flags::kRowsFree, op - 1);  // every destination has read our previous dispatch
    cuda::PeerPack pk;
    pk.x = x.data_ptr();
    pk.row_bytes = row_bytes;
    pk.group_TK = st.key_TK.data_ptr<int64_t>();
    pk.idx_TK = st.idx_TK.data_ptr<int64_t>();
    pk.w_TK = st.w_TK.data_ptr<float>();
    pk.num_tokens = st.num_tokens;
    pk.topk = st.routing.topk;
    pk.experts_per_rank = experts_per_rank_;
    pk.expert_groups = st.mode == Mode::kLowLatency;
    pk.row_GT = st.row_GT.data_ptr<int64_t>();
    pk.first_R = st.first_R.data_ptr<int64_t>();
    pk.rows_R = st.rows_R.data_ptr<int64_t>();
    for (int d = 0; d < num_ranks_; ++d) pk.peers.ptr[d] = peers_[d];
    pk.rows_offset = rows_offset(0, rank_, row_bytes);
    pk.meta_offset = meta_offset(rank_);
    pk.header_bytes = header_len_ * 8;
    pk.with_meta = fresh;
    cuda::ipc_check(cuda::pack_to_peers(pk, stream()), rank_, "writing rows into the peers");
    if (fresh)
      for (int d = 0; d < num_ranks_; ++d)
        copy(peers_[d] + meta_offset(rank_), st.header_RC[d].data_ptr(), header_len_ * 8, d);
    signal(Flags::kRowsIn, op);
    wait(Flags::kRowsIn, op);
    const int64_t bad = fresh ? receive_plan(st, x.device()) : 0;
    // Place received rows: source-concatenated (normal) or expert-major via recv_pos.
    at::Tensor recv = at::empty({st.num_recv, H}, x.options());
    for (int s = 0; s < num_ranks_; ++s) {
      const int64_t n = st.recv_counts[s], first = st.recv_offsets[s];
      if (n == 0) continue;
      const uint8_t* src = peers_[rank_] + rows_offset(0, s, row_bytes);
      if (st.identity_order()) {
        cuda::ipc_check(cudaMemcpyAsync(static_cast<uint8_t*>(recv.data_ptr()) + first * row_bytes, src, n * row_bytes,
                                   cudaMemcpyDeviceToDevice, stream()),
                   rank_, "copy from receive region");
      } else {
        at::Tensor rows = at::from_blob(const_cast<uint8_t*>(src), {n, H}, x.options());
        cuda::unpack_rows(rows, st.recv_pos_t.narrow(0, first, n), recv);
      }
    }
    signal(Flags::kRowsFree, op);  // our regions and metadata slots are read: sources may write again
    if (bad > 0) {  // after the operation, so the peers are not left waiting for us
      throw Error("ep cuda_ipc rank " + std::to_string(rank_) + ": topk_idx holds " + std::to_string(bad) +
                      " ids outside [-1, " + std::to_string(num_experts_) + ")",
                  "expert ids must be < num_experts; -1 marks a dropped slot");
    }
    return recv;
  }

  at::Tensor combine_rows(const at::Tensor& y, const RoutedState& rs) override {
    const IpcState& st = ipc_state(rs);
    const int64_t H = y.size(1), row_bytes = H * y.element_size();
    const uint64_t op = ++combines_;
    check_error();
    wait(Flags::kBackFree, op - 1);  // every source has read our previous combine
    for (int s = 0; s < num_ranks_; ++s) {
      const int64_t n = st.recv_counts[s], first = st.recv_offsets[s];
      if (n == 0) continue;
      uint8_t* dst = peers_[s] + rows_offset(1, rank_, row_bytes);
      if (st.identity_order()) {
        cuda::ipc_check(cudaMemcpyAsync(dst, static_cast<const uint8_t*>(y.data_ptr()) + first * row_bytes, n * row_bytes,
                                   cudaMemcpyDeviceToDevice, stream()),
                   rank_, "combine write to rank " + std::to_string(s));
      } else {
        cuda::ipc_check(cuda::gather_rows(y.data_ptr(), row_bytes, st.recv_pos_t.data_ptr<int64_t>() + first, n, dst, stream()),
                   rank_, "combine pack to rank " + std::to_string(s));
      }
    }
    signal(Flags::kBackIn, op);
    wait(Flags::kBackIn, op);
    // Sum each token's returned rows in rank order (deterministic), fp32 accumulation. Codes
    // are d * max_rows + j; rows of slot d start at d * slot_rows for this row size.
    const int64_t slot_rows = static_cast<int64_t>(region_bytes_) / row_bytes;
    at::Tensor all = at::from_blob(peers_[rank_] + rows_offset(1, 0, row_bytes), {num_ranks_ * slot_rows, H}, y.options());
    const at::Tensor& code = st.combine_code_TP;
    at::Tensor pos = at::where(code.ge(0), at::div(code, max_rows_, "floor") * slot_rows + code.remainder(max_rows_), code);
    at::Tensor out = cuda::weighted_combine(all, pos, at::Tensor());
    signal(Flags::kBackFree, op);
    return out;
  }

  void check_device(const at::Tensor& t, const char* what) const override {
    if (!t.defined() || !t.is_cuda()) {
      throw Error(std::string("ep cuda_ipc: ") + what + " must be a CUDA tensor", "move activations to the GPU");
    }
  }

 private:
  static cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

  IpcState& ipc_state(const RoutedState& rs) const {
    auto* st = dynamic_cast<IpcState*>(const_cast<RoutedState*>(&rs));
    if (!st || st->group != this) {
      throw Error("ep cuda_ipc rank " + std::to_string(rank_) + ": got a handle this group did not make",
                  "pass the handle of this group's dispatch");
    }
    return *st;
  }

  // A new plan's receive side: the counts (the one host sync), then the metadata on the GPU.
  // Returns this rank's count of bad ids (read in the same copy).
  int64_t receive_plan(IpcState& st, at::Device dev) {
    const int64_t R = num_ranks_, El = experts_per_rank_, K = st.routing.topk;
    int64_t* sent = headers_ + R * header_len_;  // [R] rows we sent each destination, then the bad ids
    for (int s = 0; s < R; ++s)
      cuda::ipc_check(cudaMemcpyAsync(headers_ + s * header_len_, peers_[rank_] + meta_offset(s), header_len_ * 8,
                                 cudaMemcpyDeviceToHost, stream()),
                 rank_, "reading the received counts");
    cuda::ipc_check(cudaMemcpyAsync(sent, st.rows_R.data_ptr(), R * 8, cudaMemcpyDeviceToHost, stream()), rank_,
               "reading the sent counts");
    cuda::ipc_check(cudaMemcpyAsync(sent + R, st.num_bad.data_ptr(), 8, cudaMemcpyDeviceToHost, stream()), rank_,
               "reading the bad ids");
    cuda::ipc_check(cudaStreamSynchronize(stream()), rank_, "waiting for the peers' rows");
    check_error();
    st.routing.dest_offsets.assign(R + 1, 0);
    for (int64_t d = 0; d < R; ++d) st.routing.dest_offsets[d + 1] = st.routing.dest_offsets[d] + sent[d];
    std::vector<int64_t> counts;
    std::vector<int64_t> per_expert(El, 0);
    for (int s = 0; s < R; ++s) {
      const int64_t* h = headers_ + s * header_len_;
      if (h[0] < 0 || h[0] > max_rows_) {
        throw Error("ep cuda_ipc rank " + std::to_string(rank_) + ": rank " + std::to_string(s) + " sent " +
                        std::to_string(h[0]) + " rows, expected [0, " + std::to_string(max_rows_) + "]",
                    "every rank must use the same [ep] config and make the same dispatch/combine calls",
                    ErrorCode::kInternal);
      }
      if (st.mode == Mode::kNormal) counts.push_back(h[0]);
      for (int64_t e = 0; e < El; ++e) {
        if (st.mode == Mode::kLowLatency) counts.push_back(h[1 + e]);
        per_expert[e] += h[1 + e];
      }
    }
    detail::set_recv_counts(st, counts);
    st.per_expert = per_expert;
    if (st.recv_pos_t.defined()) st.recv_pos_t = st.recv_pos_t.to(dev);
    const at::TensorOptions iopt = at::TensorOptions().device(dev).dtype(at::kInt);
    std::vector<at::Tensor> ids, ws;
    for (int s = 0; s < R; ++s) {
      const int64_t n = st.recv_counts[s];
      uint8_t* m = peers_[rank_] + meta_offset(s) + header_len_ * 8;
      ids.push_back(at::from_blob(m, {n, K}, iopt));
      ws.push_back(at::from_blob(m + n * K * 4, {n, K}, iopt.dtype(at::kFloat)));
    }
    detail::set_recv_topk(st, at::cat(ids), at::cat(ws));  // copies: the slots may be reused
    return sent[R];
  }

  void copy(uint8_t* dst, const void* src, int64_t bytes, int peer) {
    if (bytes <= 0) return;
    cuda::ipc_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()), rank_,
               "metadata to rank " + std::to_string(peer));
  }
  // MOERL_CUDA_IPC_WAIT: "gpu" (a kernel polls), "host" (the host polls), or "auto" (the
  // default): the host where a peer shares this GPU (ep/cuda/ipc_flags.h says why).
  bool host_polled_waits(bool shares_gpu) const {
    const char* v = std::getenv("MOERL_CUDA_IPC_WAIT");
    const std::string mode = v ? v : "auto";
    if (mode != "auto" && mode != "gpu" && mode != "host") {
      throw Error("ep cuda_ipc: MOERL_CUDA_IPC_WAIT='" + mode + "' is not auto, gpu or host",
                  "unset it (auto: the host polls only where ranks share a GPU)");
    }
    return mode == "host" || (mode == "auto" && shares_gpu);
  }
  void signal(Flags::Flag f, uint64_t op) { flags_->signal(f, op, stream()); }
  void wait(Flags::Flag f, uint64_t op) { flags_->wait(f, op, stream()); }
  void check_error() const { flags_->check_error(); }
  // Byte offset of half `which` (0 dispatch, 1 combine), slot `s`, for rows of row_bytes:
  // slots are region_bytes / row_bytes rows apart, so a half reads as one [R*rows, H] tensor.
  size_t rows_offset(int which, int s, int64_t row_bytes) const {
    const size_t slot_rows = region_bytes_ / row_bytes;
    return flags_bytes_ + static_cast<size_t>(which) * num_ranks_ * region_bytes_ + s * slot_rows * row_bytes;
  }
  size_t meta_offset(int s) const { return meta_offset_ + s * meta_slot_bytes_; }
  std::vector<uint8_t> get(const std::string& k, int peer) {
    try {
      return store_->get(k);
    } catch (const std::exception& e) {
      throw Error("ep cuda_ipc rank " + std::to_string(rank_) + ": waiting for rank " + std::to_string(peer) +
                      " (" + k + "): " + e.what(),
                  "a peer died or diverged; every rank must create and destroy the group together",
                  ErrorCode::kTimeout);
    }
  }
  void barrier(const std::string& name) {
    store_->set("bar/" + name + "/" + std::to_string(rank_), std::vector<uint8_t>{1});
    for (int s = 0; s < num_ranks_; ++s) get("bar/" + name + "/" + std::to_string(s), s);
  }

  c10::intrusive_ptr<c10d::Store> store_;
  const int64_t max_rows_;     // buffers_->max_rows: the stride of combine codes
  const size_t region_bytes_;  // buffers_->region_bytes
  const int64_t experts_per_rank_, header_len_;
  const size_t flags_bytes_, meta_offset_, meta_slot_bytes_;
  void* base_ = nullptr;
  std::vector<uint8_t*> peers_;  // every rank's buffer, ours included
  std::unique_ptr<cuda::IpcFlags> flags_;
  int64_t* headers_ = nullptr;        // pinned: a new plan's received counts, sent counts, bad ids
  uint64_t dispatches_ = 0, combines_ = 0;
};

}  // namespace

std::shared_ptr<Group> cuda_ipc_group_in(const Config& cfg, int64_t num_experts, const detail::World& w) {
  // cfg.backend names the host transports (make_group) or hierarchical; this call picks
  // cuda_ipc, so check the bounds as for any multi-rank backend rather than loopback's rule.
  Config checked = cfg;
  checked.backend = Backend::kAllToAll;
  checked.validate(num_experts, w.world_size);
  return std::make_shared<CudaIpcGroup>(cfg, num_experts, w);
}

std::shared_ptr<Group> cuda_ipc_group(const Config& cfg, int64_t num_experts) {
  return cuda_ipc_group_in(cfg, num_experts, detail::join_world("cuda_ipc", cfg.timeout_s));
}

}  // namespace moerl::ep
