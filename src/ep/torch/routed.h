// The routed-dispatch base of every Group (loopback, fabric, alltoall, cuda_ipc, nccl):
// RoutedGroup owns the prologue and epilogue of dispatch/combine (cached-handle checks,
// input validation, buffer bounds, the routing plan, the Dispatched result); a backend
// implements only its transport (dispatch_rows, combine_rows) and, where it plans
// elsewhere than on the host, plan(). RoutedState is the routing of one dispatch: the
// send plan, what arrives from each source, where each received row lands, and the
// received top-k metadata. A Handle's state points to one; immutable once the dispatch
// that made it returns (cached dispatch and combine only read it).
//
// Received row order (the contract every backend honours, so they are swappable):
//   normal:      by source rank, then source token order (one row per token and rank)
//   low_latency: by local expert, then source rank, then token (one row per token and
//                expert); num_recv_tokens_per_expert gives the group sizes.
//
//   class MyGroup final : public RoutedGroup {
//     at::Tensor dispatch_rows(const at::Tensor& x_TH, const std::shared_ptr<RoutedState>& st, Meta m) override;
//     at::Tensor combine_rows(const at::Tensor& y_NH, const RoutedState& st) override;
//   };
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ep/buffer_layout.h"
#include "ep/ep.h"
#include "ep/kernels/routing.h"
#include "ep/torch/tensors.h"

namespace moerl::ep::detail {

struct RoutedState {
  virtual ~RoutedState() = default;  // a backend may extend it with what it keeps per plan (cuda_ipc)
  Mode mode = Mode::kNormal;
  int num_ranks = 1;
  // What this rank sends. A backend that plans on the device (nccl) fills only the sizes
  // and dest_offsets here and keeps row_token on the device; loopback leaves it empty.
  kernels::Routing routing;
  at::Tensor row_token;                     // int64 [S], routing.row_token as a tensor (loopback: kept
                                            // tokens, undefined when every token is kept)
  std::vector<int64_t> recv_counts;         // [R] rows from each source
  std::vector<int64_t> recv_offsets;        // [R+1] in source-concatenated order
  std::vector<int64_t> recv_expert_counts;  // low_latency: [R*E_local] rows from (source, local expert)
  std::vector<int64_t> recv_pos;            // low_latency: source-concatenated row -> output row
  at::Tensor recv_pos_t;                    // int64 [N], recv_pos as a tensor (low_latency)
  at::Tensor recv_topk_idx_NK, recv_topk_weights_NK;  // on the payloads' device (cuda_ipc, nccl: GPU)
  std::vector<int64_t> per_expert;          // [E_local]
  int64_t num_tokens = 0, num_recv = 0;
  bool identity_order() const { return mode == Mode::kNormal; }
};

std::shared_ptr<RoutedState> plan_routing(const at::Tensor& topk_idx_TK, const at::Tensor& topk_weights_TK,
                                          int64_t num_experts, int num_ranks, Mode mode);
// counts: normal: [R] rows per source; low_latency: [R*E_local] rows per (source, expert).
void set_recv_counts(RoutedState& st, const std::vector<int64_t>& counts);
// Builds recv_topk_idx/weights from the per-source metadata blocks (source-concatenated
// row order, int32 local ids and float weights, K per row) and, in normal mode, the
// per-expert counts.
void set_recv_meta(RoutedState& st, const std::vector<const int32_t*>& idx_per_source,
                   const std::vector<const float*>& w_per_source);
// Stores received top-k ids (any integer type) and float32 weights, rows in arrival order (by
// source), on the state in the contract's row order (low_latency: expert-major via recv_pos_t).
void set_recv_topk(RoutedState& st, const at::Tensor& ids_NK, const at::Tensor& weights_NK);
Dispatched make_dispatched(const std::shared_ptr<RoutedState>& st, at::Tensor recv_x_NH);
std::shared_ptr<RoutedState> state_of(const Handle& h);

class RoutedGroup : public Group {
 public:
  int rank() const override { return rank_; }
  int world_size() const override { return num_ranks_; }
  int64_t num_experts() const override { return num_experts_; }
  // compute_layout on the host; device backends override.
  Layout get_dispatch_layout(const at::Tensor& topk_idx_TK, int64_t num_experts) override;
  // check_device, then: cached: the handle's state and x's row count; else
  // check_dispatch_inputs, the buffer bounds and plan(). Then x's dtype and row size,
  // dispatch_rows, and the Dispatched built from the state (make_dispatched).
  Dispatched dispatch(const at::Tensor& x_TH, const at::Tensor& topk_idx_TK, const at::Tensor& topk_weights_TK,
                      const Layout& layout, const Handle* cached) final;
  // The handle's state, check_device, check_combine_input, the row size, combine_rows.
  at::Tensor combine(const at::Tensor& y_NH, const Handle& handle) final;

 protected:
  // What dispatch_rows must do besides moving rows.
  enum class Meta {
    kExchange,  // a new plan: unless plan() did, exchange counts and top-k metadata and
                // record them (set_recv_counts, set_recv_meta)
    kReuse,     // a cached handle: counts and metadata are the state's; only rows move
  };

  // `name` prefixes errors ("ep fabric: ..."); `buffers`, when set, bounds T, K and row bytes.
  RoutedGroup(std::string name, const Config& cfg, int64_t num_experts, int rank, int num_ranks,
              std::optional<BufferLayout> buffers = std::nullopt);

  // The send plan of validated inputs. Default: ids validated by compute_layout and
  // plan_routing on the host (inputs copied there if needed).
  virtual std::shared_ptr<RoutedState> plan(const DispatchInputs& in, const Layout& layout);
  // Moves x's rows (contiguous, float32/bfloat16, checked against the buffers) as the
  // state plans; returns recv_x_NH in the contract's row order.
  virtual at::Tensor dispatch_rows(const at::Tensor& x_TH, const std::shared_ptr<RoutedState>& st, Meta meta) = 0;
  // Returns [T,H] at the source from y (contiguous, [num_recv,H], checked like x).
  virtual at::Tensor combine_rows(const at::Tensor& y_NH, const RoutedState& st) = 0;
  // Throws unless `t` is where this backend's payloads must live (default: anywhere).
  virtual void check_device(const at::Tensor& t, const char* what) const {}
  // True for transports of host memory (fabric, Gloo): dispatch and combine then stage a GPU
  // payload through the host, and the rows and received top-k metadata come back on its device.
  virtual bool moves_host_memory() const { return false; }

  // Immutable after construction.
  const std::string name_;
  const Config cfg_;
  const int64_t num_experts_;
  const int rank_, num_ranks_;
  const std::optional<BufferLayout> buffers_;
};

}  // namespace moerl::ep::detail
