// The standard expert-parallel path shared by the alltoall (c10d Gloo) and nccl Groups:
// rows permuted by destination (index_select), one all-to-all-v, unpermuted into the
// contract's order (index_copy); combine is the reverse all-to-all and an index_add in
// float32, rows in destination-rank order (as fabric sums). A backend supplies the process
// group (AllToAllOver<ProcessGroup>) and its plan() (host or device), which must record
// counts and metadata.
//
//   class MyGroup final : public AllToAllOver<c10d::ProcessGroupGloo> {
//     MyGroup(...) : AllToAllOver("alltoall", cfg, E, rank, R) { pg_ = ...; }
//     std::shared_ptr<RoutedState> plan(const DispatchInputs& in, const Layout& l) override;
//   };
#pragma once

#include <utility>
#include <vector>

#include "ep/torch/routed.h"

namespace moerl::ep::detail {

class AllToAllPath : public RoutedGroup {
 protected:
  using RoutedGroup::RoutedGroup;

  // One blocking all_to_all_single on the backend's process group (empty splits: equal).
  virtual void alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_split,
                             std::vector<int64_t>& in_split) = 0;
  // alltoall_base; a failure becomes moerl::Error naming this rank, its peers and `what`.
  void alltoall(at::Tensor out, at::Tensor in, std::vector<int64_t> out_split, std::vector<int64_t> in_split,
                const char* what);
  // Exchanges the per-row top-k metadata (idx int32 [S,K], weights float32 [S,K], rows in
  // send order) as one int32 [S,2K] all-to-all; needs st.recv_counts. Returns the received
  // ids and weights [N,K] in arrival (source-concatenated) order, contiguous.
  std::pair<at::Tensor, at::Tensor> exchange_meta(const at::Tensor& idx_SK, const at::Tensor& w_SK,
                                                  const RoutedState& st);

  at::Tensor dispatch_rows(const at::Tensor& x_TH, const std::shared_ptr<RoutedState>& st, Meta meta) override;
  at::Tensor combine_rows(const at::Tensor& y_NH, const RoutedState& st) override;
};

// AllToAllPath over a c10d process group type (Gloo, NCCL): its all_to_all_single.
template <class ProcessGroup>
class AllToAllOver : public AllToAllPath {
 protected:
  using AllToAllPath::AllToAllPath;
  void alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_split,
                     std::vector<int64_t>& in_split) override {
    pg_->alltoall_base(out, in, out_split, in_split)->wait();
  }
  c10::intrusive_ptr<ProcessGroup> pg_;  // set by the constructor; used by one thread
};

// Rows this rank sends to each destination: [R] from st.routing.dest_offsets.
std::vector<int64_t> send_rows(const RoutedState& st);

}  // namespace moerl::ep::detail
