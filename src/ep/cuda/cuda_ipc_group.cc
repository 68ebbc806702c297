// cuda_ipc Group: a barrier, pack rows into peers' mapped regions, publish counts and
// metadata through the store, wait for every peer's "written" flag, then place rows.
// Input checks, the host routing plan and the Dispatched result are RoutedGroup's
// (ep/torch/routed.h); regions are sized by ep/buffer_layout.h (metadata separate).
#include "ep/cuda/cuda_ipc_group.h"

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "ep/buffer_layout.h"
#include "ep/cuda/kernels.h"
#include "ep/cuda/ops.h"
#include "ep/torch/routed.h"
#include "ep/torch/tensors.h"
#include "ep/torch/world.h"

namespace moerl::ep {
namespace {

using detail::RoutedState;

void cuda_check(cudaError_t err, int rank, const std::string& what) {
  if (err != cudaSuccess) {
    throw Error("ep cuda_ipc rank " + std::to_string(rank) + ": " + what + ": " + cudaGetErrorString(err),
                "all ranks must run on GPUs of one node with CUDA IPC allowed", ErrorCode::kInternal);
  }
}

std::vector<uint8_t> to_bytes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

class CudaIpcGroup final : public detail::RoutedGroup {
 public:
  CudaIpcGroup(const Config& cfg, int64_t num_experts, detail::World w)
      : RoutedGroup("cuda_ipc", cfg, num_experts, w.rank, w.world_size,
                    BufferLayout::make(cfg, num_experts, w.world_size, BufferLayout::Meta::kSeparate)),
        store_(w.store),
        max_rows_(buffers_->max_rows),
        region_bytes_(buffers_->region_bytes) {
    cuda_check(cudaGetDevice(&device_), rank_, "cudaGetDevice");
    cuda_check(cudaMalloc(&base_, buffers_->total_bytes), rank_, "cudaMalloc of the receive buffers");
    cudaIpcMemHandle_t h;
    cuda_check(cudaIpcGetMemHandle(&h, base_), rank_, "cudaIpcGetMemHandle");
    store_->set("handle/" + std::to_string(rank_), to_bytes(&h, sizeof(h)));
    peers_.assign(num_ranks_, nullptr);
    for (int s = 0; s < num_ranks_; ++s) {
      if (s == rank_) {
        peers_[s] = base_;
        continue;
      }
      std::vector<uint8_t> b = get("handle/" + std::to_string(s), s);
      cudaIpcMemHandle_t ph;
      std::memcpy(&ph, b.data(), sizeof(ph));
      cuda_check(cudaIpcOpenMemHandle(&peers_[s], ph, cudaIpcMemLazyEnablePeerAccess), rank_,
                 "cudaIpcOpenMemHandle of rank " + std::to_string(s));
    }
    barrier("mapped");
  }

  ~CudaIpcGroup() override {
    try {
      barrier("closing");  // no peer writes into our buffers after this
    } catch (...) {
    }
    for (int s = 0; s < num_ranks_; ++s)
      if (s != rank_ && peers_[s]) cudaIpcCloseMemHandle(peers_[s]);
    if (base_) cudaFree(base_);
  }

  Layout get_dispatch_layout(const at::Tensor& topk_idx_TK, int64_t num_experts) override {
    detail::check_num_experts(num_experts, num_experts_);
    if (topk_idx_TK.is_cuda()) return cuda::compute_layout(topk_idx_TK, num_experts, num_ranks_);
    return detail::compute_layout(topk_idx_TK, num_experts, num_ranks_);
  }

 protected:
  // The host plan (ids copied to the host), with the send order on the device for packing.
  std::shared_ptr<RoutedState> plan(const detail::DispatchInputs& in, const Layout& layout) override {
    std::shared_ptr<RoutedState> st = RoutedGroup::plan(in, layout);
    st->row_token = st->row_token.to(in.x_TH.device());
    return st;
  }

  at::Tensor dispatch_rows(const at::Tensor& x, const std::shared_ptr<RoutedState>& st, Meta meta) override {
    const bool cached = meta == Meta::kReuse;
    const int64_t H = x.size(1), row_bytes = H * x.element_size();
    const auto& rt = st->routing;
    const int64_t K = rt.topk, El = rt.experts_per_rank;
    const std::string seq = std::to_string(++seq_);
    enter(seq);
    // Rows for each destination go into its region for this source: one pack launch each.
    for (int d = 0; d < num_ranks_; ++d) {
      const int64_t n = rt.rows_to(d);
      if (n == 0) continue;
      uint8_t* dst = static_cast<uint8_t*>(peers_[d]) + region(0, rank_, row_bytes);
      cuda_check(gather_rows(x, row_bytes, st->row_token.narrow(0, rt.dest_offsets[d], n), n, dst), rank_,
                 "pack to rank " + std::to_string(d));
    }
    if (!cached) {
      for (int d = 0; d < num_ranks_; ++d) {
        const int64_t n = rt.rows_to(d), first = rt.dest_offsets[d];
        std::vector<int64_t> counts;
        if (cfg_.mode == Mode::kNormal) counts = {n};
        else
          for (int64_t e = 0; e < El; ++e)
            counts.push_back(rt.expert_offsets[d * El + e + 1] - rt.expert_offsets[d * El + e]);
        std::vector<uint8_t> msg(counts.size() * 8 + n * K * 8);
        std::memcpy(msg.data(), counts.data(), counts.size() * 8);
        std::memcpy(msg.data() + counts.size() * 8, rt.row_topk_idx.data() + first * K, n * K * 4);
        std::memcpy(msg.data() + counts.size() * 8 + n * K * 4, rt.row_topk_weights.data() + first * K, n * K * 4);
        store_->set(key("meta", seq, rank_, d), msg);
      }
    }
    written(seq, "d");
    if (!cached) {
      const size_t nc = cfg_.mode == Mode::kNormal ? 1 : El;
      std::vector<std::vector<uint8_t>> msgs(num_ranks_);
      std::vector<int64_t> counts(num_ranks_ * nc);
      for (int s = 0; s < num_ranks_; ++s) {
        msgs[s] = get(key("meta", seq, s, rank_), s);
        store_->deleteKey(key("meta", seq, s, rank_));
        std::memcpy(&counts[s * nc], msgs[s].data(), nc * 8);
      }
      detail::set_recv_counts(*st, counts);
      std::vector<const int32_t*> mi(num_ranks_);
      std::vector<const float*> mw(num_ranks_);
      for (int s = 0; s < num_ranks_; ++s) {
        const int64_t n = st->recv_counts[s];
        mi[s] = reinterpret_cast<const int32_t*>(msgs[s].data() + nc * 8);
        mw[s] = reinterpret_cast<const float*>(msgs[s].data() + nc * 8 + n * K * 4);
      }
      detail::set_recv_meta(*st, mi, mw);
      st->recv_topk_idx_NK = st->recv_topk_idx_NK.to(x.device());
      st->recv_topk_weights_NK = st->recv_topk_weights_NK.to(x.device());
      if (st->recv_pos_t.defined()) st->recv_pos_t = st->recv_pos_t.to(x.device());
      build_combine_pos(st, x.device());
    }
    // Place received rows: source-concatenated (normal) or expert-major via recv_pos.
    at::Tensor recv = at::empty({st->num_recv, H}, x.options());
    for (int s = 0; s < num_ranks_; ++s) {
      const int64_t n = st->recv_counts[s], first = st->recv_offsets[s];
      if (n == 0) continue;
      const uint8_t* src = static_cast<uint8_t*>(base_) + region(0, s, row_bytes);
      if (st->identity_order()) {
        cuda_check(cudaMemcpyAsync(static_cast<uint8_t*>(recv.data_ptr()) + first * row_bytes, src, n * row_bytes,
                                   cudaMemcpyDeviceToDevice, stream()),
                   rank_, "copy from receive region");
      } else {
        at::Tensor rows = at::from_blob(const_cast<uint8_t*>(src), {n, H}, x.options());
        cuda::unpack_rows(rows, st->recv_pos_t.narrow(0, first, n), recv);
      }
    }
    return recv;
  }

  at::Tensor combine_rows(const at::Tensor& y, const RoutedState& st) override {
    const int64_t H = y.size(1), row_bytes = H * y.element_size();
    const std::string seq = std::to_string(++seq_);
    enter(seq);
    for (int s = 0; s < num_ranks_; ++s) {
      const int64_t n = st.recv_counts[s], first = st.recv_offsets[s];
      if (n == 0) continue;
      uint8_t* dst = static_cast<uint8_t*>(peers_[s]) + region(1, rank_, row_bytes);
      if (st.identity_order()) {
        cuda_check(cudaMemcpyAsync(dst, static_cast<const uint8_t*>(y.data_ptr()) + first * row_bytes, n * row_bytes,
                                   cudaMemcpyDeviceToDevice, stream()),
                   rank_, "combine write to rank " + std::to_string(s));
      } else {
        cuda_check(gather_rows(y, row_bytes, st.recv_pos_t.narrow(0, first, n), n, dst), rank_,
                   "combine pack to rank " + std::to_string(s));
      }
    }
    written(seq, "c");
    // Sum each token's returned rows in rank order (deterministic), fp32 accumulation.
    const int64_t slot_rows = rows_per_slot(row_bytes);
    at::Tensor all = at::from_blob(static_cast<uint8_t*>(base_) + region(1, 0, row_bytes),
                                   {num_ranks_ * slot_rows, H}, y.options());
    // pos holds d * max_rows + j; rows of slot d start at d * slot_rows here.
    at::Tensor code = combine_pos(st);
    at::Tensor pos = at::where(code.ge(0), at::div(code, max_rows_, "floor") * slot_rows + code.remainder(max_rows_), code);
    return cuda::weighted_combine(all, pos, at::Tensor());
  }

  void check_device(const at::Tensor& t, const char* what) const override {
    if (!t.defined() || !t.is_cuda()) {
      throw Error(std::string("ep cuda_ipc: ") + what + " must be a CUDA tensor", "move activations to the GPU");
    }
  }

 private:
  static cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }
  // Packs src[rows] straight into (peer) memory dst.
  cudaError_t gather_rows(const at::Tensor& src, int64_t row_bytes, const at::Tensor& rows, int64_t n, void* dst) {
    return cuda::gather_rows(src.data_ptr(), row_bytes, rows.data_ptr<int64_t>(), n, dst, stream());
  }
  // Byte offset of half `which` (0 dispatch, 1 combine), slot `s`, for rows of row_bytes:
  // slots are rows_per_slot(row_bytes) rows apart, so a half reads as one [R*rows, H] tensor.
  int64_t rows_per_slot(int64_t row_bytes) const { return static_cast<int64_t>(region_bytes_) / row_bytes; }
  size_t region(int which, int s, int64_t row_bytes) const {
    return static_cast<size_t>(which) * num_ranks_ * region_bytes_ +
           static_cast<size_t>(s) * rows_per_slot(row_bytes) * row_bytes;
  }
  std::string key(const char* kind, const std::string& seq, int from, int to) const {
    return std::string(kind) + "/" + seq + "/" + std::to_string(from) + ">" + std::to_string(to);
  }
  std::vector<uint8_t> get(const std::string& k, int peer) {
    try {
      return store_->get(k);
    } catch (const std::exception& e) {
      throw Error("ep cuda_ipc rank " + std::to_string(rank_) + ": waiting for rank " + std::to_string(peer) +
                      " (" + k + "): " + e.what(),
                  "a peer died or diverged; every rank must make the same dispatch/combine calls",
                  ErrorCode::kTimeout);
    }
  }
  void barrier(const std::string& name) {
    store_->set("bar/" + name + "/" + std::to_string(rank_), std::vector<uint8_t>{1});
    for (int s = 0; s < num_ranks_; ++s) get("bar/" + name + "/" + std::to_string(s), s);
  }
  // Start of an op: our stream has finished reading our regions (previous op), and every
  // peer has too, so writes into regions may begin.
  void enter(const std::string& seq) {
    cuda_check(cudaStreamSynchronize(stream()), rank_, "stream sync");
    barrier("op" + seq);
  }
  // Our writes into peers are complete; wait until every peer's writes into ours are.
  void written(const std::string& seq, const char* kind) {
    cuda_check(cudaStreamSynchronize(stream()), rank_, "stream sync after writes");
    barrier(std::string("w") + kind + seq);
  }
  // For combine: pos[t, j] = row (in this rank's combine regions) of token t's j-th returned
  // row, in rank order; -1 pads. Built once per dispatch plan.
  void build_combine_pos(const std::shared_ptr<RoutedState>& sp, at::Device dev) {
    const RoutedState& st = *sp;
    const auto& rt = st.routing;
    const int64_t T = st.num_tokens;
    std::vector<int64_t> per_token(T, 0);
    for (int64_t i = 0; i < rt.num_rows(); ++i) ++per_token[rt.row_token[i]];
    int64_t P = 1;
    for (int64_t c : per_token) P = std::max(P, c);
    at::Tensor pos = at::full({T, P}, -1, at::kLong);
    int64_t* p = pos.data_ptr<int64_t>();
    std::fill(per_token.begin(), per_token.end(), 0);
    for (int d = 0; d < num_ranks_; ++d)
      for (int64_t j = 0; j < rt.rows_to(d); ++j) {
        const int64_t t = rt.row_token[rt.dest_offsets[d] + j];
        p[t * P + per_token[t]++] = d * max_rows_ + j;
      }
    // Drop entries whose handles are gone, then remember this plan's table.
    combine_pos_.erase(std::remove_if(combine_pos_.begin(), combine_pos_.end(),
                                      [](const auto& e) { return e.first.expired(); }),
                       combine_pos_.end());
    combine_pos_.emplace_back(sp, pos.to(dev));
  }
  const at::Tensor& combine_pos(const RoutedState& st) const {
    for (const auto& e : combine_pos_)
      if (e.first.lock().get() == &st) return e.second;
    throw Error("ep cuda_ipc rank " + std::to_string(rank_) + ": combine got a handle this group did not make",
                "pass the handle of this group's dispatch");
  }
  c10::intrusive_ptr<c10d::Store> store_;
  const int64_t max_rows_;     // buffers_->max_rows: the stride of combine_pos codes
  const size_t region_bytes_;  // buffers_->region_bytes
  int device_ = 0;
  void* base_ = nullptr;
  std::vector<void*> peers_;
  uint64_t seq_ = 0;
  std::vector<std::pair<std::weak_ptr<RoutedState>, at::Tensor>> combine_pos_;
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
