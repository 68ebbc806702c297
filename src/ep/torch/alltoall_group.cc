// The baseline Group: the standard expert-parallel path over c10d ProcessGroupGloo —
// permute rows by destination (index_select), exchange counts (all-to-all), all-to-all-v
// of rows and of top-k metadata, unpermute (ep/torch/alltoall_path.h). Same routing and
// row order as fabric, so the two are swappable by config and comparable in `moerl bench ep`.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "base/env.h"
#include "ep/ep.h"
#include "ep/torch/alltoall_path.h"
#include "ep/torch/fabric_group.h"
#include "ep/torch/world.h"

namespace moerl::ep {
namespace {

using detail::RoutedState;

class AllToAllGroup final : public detail::AllToAllOver<c10d::ProcessGroupGloo> {
 public:
  AllToAllGroup(const Config& cfg, int64_t num_experts, const detail::World& world)
      : AllToAllOver("alltoall", cfg, num_experts, world.rank, world.world_size) {
    auto opts = c10d::ProcessGroupGloo::Options::create(
        std::chrono::milliseconds(static_cast<int64_t>(cfg.timeout_s * 1000)));
    const std::string addr = env::rendezvous().master_addr;
    const bool local = addr.rfind("127.", 0) == 0 || addr == "localhost";
    opts->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                  : c10d::ProcessGroupGloo::createDefaultDevice());
    opts->threads = 1;
    pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(world.store, rank_, num_ranks_, opts);
  }

 protected:
  // Gloo moves host memory: GPU payloads are staged (RoutedGroup).
  bool moves_host_memory() const override { return true; }

  // The host plan, then the count exchange (rows per destination, per destination expert
  // in low-latency mode) and the top-k metadata, before any row moves.
  std::shared_ptr<RoutedState> plan(const detail::DispatchInputs& in, const Layout& layout) override {
    std::shared_ptr<RoutedState> st = RoutedGroup::plan(in, layout);
    const auto& rt = st->routing;
    const int64_t El = rt.experts_per_rank, K = rt.topk, S = rt.num_rows();
    const int64_t C = cfg_.mode == Mode::kNormal ? 1 : El;
    at::Tensor send_counts = at::empty({num_ranks_ * C}, at::kLong);
    int64_t* sc = send_counts.data_ptr<int64_t>();
    for (int d = 0; d < num_ranks_; ++d)
      for (int64_t c = 0; c < C; ++c)
        sc[d * C + c] = C == 1 ? rt.rows_to(d) : rt.expert_offsets[d * El + c + 1] - rt.expert_offsets[d * El + c];
    at::Tensor recv_counts = at::empty_like(send_counts);
    alltoall(recv_counts, send_counts, {}, {}, "count exchange");
    detail::set_recv_counts(*st, std::vector<int64_t>(recv_counts.data_ptr<int64_t>(),
                                                      recv_counts.data_ptr<int64_t>() + recv_counts.numel()));
    auto [idx, w] = exchange_meta(at::from_blob(const_cast<int32_t*>(rt.row_topk_idx.data()), {S, K}, at::kInt),
                                  at::from_blob(const_cast<float*>(rt.row_topk_weights.data()), {S, K}, at::kFloat),
                                  *st);
    std::vector<const int32_t*> pi(num_ranks_);
    std::vector<const float*> pw(num_ranks_);
    for (int s = 0; s < num_ranks_; ++s) {
      pi[s] = idx.data_ptr<int32_t>() + st->recv_offsets[s] * K;
      pw[s] = w.data_ptr<float>() + st->recv_offsets[s] * K;
    }
    detail::set_recv_meta(*st, pi, pw);
    return st;
  }
};

}  // namespace

std::shared_ptr<Group> alltoall_group(const Config& cfg, int64_t num_experts) {
  return detail::make_world_group<AllToAllGroup>("alltoall", cfg, num_experts);
}

std::shared_ptr<Group> alltoall_group_in(const Config& cfg, int64_t num_experts, const detail::World& world) {
  cfg.validate(num_experts, world.world_size);
  return std::make_shared<AllToAllGroup>(cfg, num_experts, world);
}

}  // namespace moerl::ep
