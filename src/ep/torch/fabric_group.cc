// The fabric Group: dispatch/combine over libfabric tagged messages. Each rank owns one
// buffer (allocated and registered once): R send regions then R receive regions, each
// sized for the largest message (ep/buffer_layout.h, metadata inline). Per operation
// every rank posts one receive per peer into that peer's region (tagged by sequence
// number and source), packs one message per destination straight into its send region,
// and counts completions per peer. Input checks, the routing plan and the Dispatched
// result are RoutedGroup's (ep/torch/routed.h); this file is the transport. Row counts travel in the message
// header, so no separate size negotiation is needed (receive regions are sized to max).
#include <cstring>

#include "base/check.h"
#include "base/env.h"
#include "base/error.h"
#include "ep/buffer_layout.h"
#include "ep/ep.h"
#include "ep/kernels/rows.h"
#include "ep/torch/fabric_group.h"
#include "ep/torch/routed.h"
#include "ep/torch/tensors.h"
#include "ep/torch/world.h"
#include "ep/transport/fabric.h"
#include "ep/transport/wire.h"

namespace moerl::ep {
namespace {

using detail::RoutedState;

class FabricGroup final : public detail::RoutedGroup {
 public:
  FabricGroup(const Config& cfg, int64_t num_experts, const detail::World& world)
      : RoutedGroup("fabric", cfg, num_experts, world.rank, world.world_size,
                    BufferLayout::make(cfg, num_experts, world.world_size, BufferLayout::Meta::kInline)),
        region_bytes_(buffers_->region_bytes) {
    FabricEndpoint::Options o;
    o.provider = cfg.provider.empty() ? env::get_or("FI_PROVIDER", "shm") : cfg.provider;
    o.rank = rank_;
    o.world_size = num_ranks_;
    o.buffer_bytes = buffers_->total_bytes;
    o.timeout_s = cfg.timeout_s;
    auto store = world.store;
    const int R = num_ranks_;
    ep_ = std::make_unique<FabricEndpoint>(o, [store, R, this](const std::string& mine) {
      store->set("addr/" + std::to_string(rank_), std::vector<uint8_t>(mine.begin(), mine.end()));
      std::vector<std::string> all(R);
      for (int r = 0; r < R; ++r) {
        auto v = store->get("addr/" + std::to_string(r));
        all[r].assign(v.begin(), v.end());
      }
      return all;
    });
  }

 protected:
  // Payloads on a GPU go through host memory (registering device memory with FI_HMEM is not
  // built): RoutedGroup stages them.
  bool moves_host_memory() const override { return true; }

  at::Tensor dispatch_rows(const at::Tensor& x, const std::shared_ptr<RoutedState>& st, Meta meta) override {
    const auto dtype = detail::payload_dtype(x, "x");
    const int64_t H = x.size(1);
    const int64_t row_bytes = H * kernels::dtype_size(dtype);
    const auto& rt = st->routing;
    const int64_t El = rt.experts_per_rank, K = rt.topk;
    const bool with_meta = meta == Meta::kExchange;
    const uint32_t seq = static_cast<uint32_t>(++seq_);
    const int64_t num_counts = cfg_.mode == Mode::kNormal ? 1 : El;
    const size_t rows_at = wire::rows_offset(num_counts);

    ep_->begin("dispatch #" + std::to_string(seq));
    for (int s = 0; s < num_ranks_; ++s)
      if (s != rank_) ep_->post_recv(s, recv_offset(s), region_bytes_, tag(seq, s));
    for (int i = 1; i < num_ranks_; ++i) {
      const int d = (rank_ + i) % num_ranks_;
      uint8_t* msg = ep_->buffer() + send_offset(d);
      const int64_t n = rt.rows_to(d), first = rt.dest_offsets[d];
      auto* counts = reinterpret_cast<int64_t*>(msg + wire::counts_offset());
      if (cfg_.mode == Mode::kNormal) {
        counts[0] = n;
      } else {
        for (int64_t e = 0; e < El; ++e)
          counts[e] = rt.expert_offsets[d * El + e + 1] - rt.expert_offsets[d * El + e];
      }
      kernels::gather_rows(x.data_ptr(), row_bytes, rt.row_token.data() + first, n, msg + rows_at);
      size_t bytes = rows_at + n * row_bytes;
      if (with_meta) {
        std::memcpy(msg + bytes, rt.row_topk_idx.data() + first * K, n * K * 4);
        std::memcpy(msg + bytes + n * K * 4, rt.row_topk_weights.data() + first * K, n * K * 4);
        bytes += n * K * 8;
      }
      write_header(msg, with_meta ? wire::Kind::kDispatch : wire::Kind::kDispatchCached, seq, n, row_bytes,
                   with_meta ? K : 0, num_counts);
      ep_->post_send(d, msg, bytes, tag(seq, rank_));
    }
    ep_->wait_all();

    // Counts from every source (own rows from the plan), then place rows and metadata.
    std::vector<int64_t> counts(num_ranks_ * num_counts);
    for (int s = 0; s < num_ranks_; ++s) {
      if (s == rank_) {
        for (int64_t c = 0; c < num_counts; ++c)
          counts[s * num_counts + c] = num_counts == 1 ? rt.rows_to(s)
                                                       : rt.expert_offsets[s * El + c + 1] - rt.expert_offsets[s * El + c];
        continue;
      }
      const uint8_t* msg = ep_->buffer() + recv_offset(s);
      check_header(msg, s, with_meta ? wire::Kind::kDispatch : wire::Kind::kDispatchCached, seq, row_bytes,
                   with_meta ? K : 0, num_counts);
      std::memcpy(&counts[s * num_counts], msg + wire::counts_offset(), num_counts * 8);
    }
    if (with_meta) {
      detail::set_recv_counts(*st, counts);
    } else {
      std::vector<int64_t> expect = cfg_.mode == Mode::kNormal ? st->recv_counts : st->recv_expert_counts;
      if (expect != counts) {
        throw Error("ep fabric rank " + std::to_string(rank_) + ": cached dispatch received row counts that differ " +
                        "from the cached handle's",
                    "every rank must reuse the handle of the same dispatch", ErrorCode::kInternal);
      }
    }
    at::Tensor recv = at::empty({st->num_recv, H}, x.options());
    auto* out = static_cast<uint8_t*>(recv.data_ptr());
    std::vector<const int32_t*> meta_idx(num_ranks_);
    std::vector<const float*> meta_w(num_ranks_);
    for (int s = 0; s < num_ranks_; ++s) {
      const int64_t n = st->recv_counts[s], first = st->recv_offsets[s];
      if (s == rank_) {
        const int64_t* tokens = rt.row_token.data() + rt.dest_offsets[s];
        if (st->identity_order()) {
          kernels::gather_rows(x.data_ptr(), row_bytes, tokens, n, out + first * row_bytes);
        } else {
          for (int64_t j = 0; j < n; ++j)
            std::memcpy(out + st->recv_pos[first + j] * row_bytes, static_cast<const uint8_t*>(x.data_ptr()) + tokens[j] * row_bytes,
                        row_bytes);
        }
        meta_idx[s] = rt.row_topk_idx.data() + rt.dest_offsets[s] * K;
        meta_w[s] = rt.row_topk_weights.data() + rt.dest_offsets[s] * K;
        continue;
      }
      const uint8_t* rows = ep_->buffer() + recv_offset(s) + rows_at;
      if (st->identity_order()) {
        std::memcpy(out + first * row_bytes, rows, n * row_bytes);
      } else {
        // Rows of one (source, expert) are contiguous in the message and in the output.
        int64_t j = 0;
        for (int64_t e = 0; e < El; ++e) {
          const int64_t c = counts[s * El + e];
          if (c) std::memcpy(out + st->recv_pos[first + j] * row_bytes, rows + j * row_bytes, c * row_bytes);
          j += c;
        }
      }
      meta_idx[s] = reinterpret_cast<const int32_t*>(rows + n * row_bytes);
      meta_w[s] = reinterpret_cast<const float*>(rows + n * row_bytes + n * K * 4);
    }
    if (with_meta) detail::set_recv_meta(*st, meta_idx, meta_w);
    return recv;
  }

  at::Tensor combine_rows(const at::Tensor& y, const RoutedState& st) override {
    const auto dtype = detail::payload_dtype(y, "combine input y");
    const int64_t H = y.size(1);
    const int64_t row_bytes = H * kernels::dtype_size(dtype);
    const auto& rt = st.routing;
    const uint32_t seq = static_cast<uint32_t>(++seq_);
    const size_t rows_at = wire::rows_offset(0);
    const auto* ybytes = static_cast<const uint8_t*>(y.data_ptr());

    ep_->begin("combine #" + std::to_string(seq));
    for (int d = 0; d < num_ranks_; ++d)
      if (d != rank_) ep_->post_recv(d, recv_offset(d), rows_at + rt.rows_to(d) * row_bytes, tag(seq, d));
    for (int i = 1; i < num_ranks_; ++i) {
      const int s = (rank_ + i) % num_ranks_;
      uint8_t* msg = ep_->buffer() + send_offset(s);
      const int64_t n = st.recv_counts[s], first = st.recv_offsets[s];
      write_header(msg, wire::Kind::kCombine, seq, n, row_bytes, 0, 0);
      if (st.identity_order() && ep_->sends_from_user_memory()) {
        // Rows for source s are one contiguous block of y: send them in place.
        ep_->post_send(s, msg, rows_at, tag(seq, rank_), ybytes + first * row_bytes, n * row_bytes);
      } else {
        if (st.identity_order()) {
          std::memcpy(msg + rows_at, ybytes + first * row_bytes, n * row_bytes);
        } else {
          kernels::gather_rows(ybytes, row_bytes, st.recv_pos.data() + first, n, msg + rows_at);
        }
        ep_->post_send(s, msg, rows_at + n * row_bytes, tag(seq, rank_));
      }
    }
    ep_->wait_all();

    // Sum in rank order (0..R-1) so results are identical run to run and match alltoall.
    // Normal mode sends a token at most once to each rank: row_of[d, t] = the row of rank
    // d's block holding token t's partial sum (-1: none), then one pass writes each output
    // row once (kernels::combine_rows). Low-latency rows repeat tokens: accumulate below.
    if (cfg_.mode == Mode::kNormal) {
      const int64_t T = st.num_tokens;
      std::vector<int64_t> row_of(static_cast<size_t>(num_ranks_ * T), -1);
      std::vector<const void*> sources(num_ranks_);
      bool counts_ok = true;
      for (int d = 0; d < num_ranks_ && counts_ok; ++d) {
        const int64_t n = rt.rows_to(d);
        const int64_t* tokens = rt.row_token.data() + rt.dest_offsets[d];
        int64_t* row = row_of.data() + d * T;
        if (d == rank_) {  // own rows stay in y: row i of this block is y row recv_pos[first + i]
          const int64_t first = st.recv_offsets[d];
          sources[d] = ybytes;
          for (int64_t i = 0; i < n; ++i) row[tokens[i]] = st.identity_order() ? first + i : st.recv_pos[first + i];
          continue;
        }
        const uint8_t* msg = ep_->buffer() + recv_offset(d);
        check_header(msg, d, wire::Kind::kCombine, seq, row_bytes, 0, 0);
        // A wrong row count is reported by the accumulating path below.
        counts_ok = static_cast<int64_t>(reinterpret_cast<const wire::Header*>(msg)->rows) == n;
        sources[d] = msg + rows_at;
        for (int64_t i = 0; i < n && counts_ok; ++i) row[tokens[i]] = i;
      }
      if (counts_ok) {
        at::Tensor out = at::empty({T, H}, y.options());
        kernels::combine_rows(sources.data(), row_of.data(), num_ranks_, T, H, dtype, out.data_ptr());
        return out;
      }
    }
    at::Tensor acc = at::zeros({st.num_tokens, H}, at::kFloat);
    float* a = acc.data_ptr<float>();
    std::vector<uint8_t> own;
    for (int d = 0; d < num_ranks_; ++d) {
      const int64_t n = rt.rows_to(d);
      const int64_t* tokens = rt.row_token.data() + rt.dest_offsets[d];
      const uint8_t* rows;
      if (d == rank_) {
        const int64_t first = st.recv_offsets[d];
        if (st.identity_order()) {
          rows = ybytes + first * row_bytes;
        } else {
          own.resize(n * row_bytes);
          kernels::gather_rows(ybytes, row_bytes, st.recv_pos.data() + first, n, own.data());
          rows = own.data();
        }
      } else {
        const uint8_t* msg = ep_->buffer() + recv_offset(d);
        check_header(msg, d, wire::Kind::kCombine, seq, row_bytes, 0, 0);
        const auto* h = reinterpret_cast<const wire::Header*>(msg);
        if (static_cast<int64_t>(h->rows) != n) {
          throw Error("ep fabric rank " + std::to_string(rank_) + ": combine got " + std::to_string(h->rows) +
                          " rows from rank " + std::to_string(d) + ", expected " + std::to_string(n),
                      "every rank must pass the handle of the same dispatch", ErrorCode::kInternal);
        }
        rows = msg + rows_at;
      }
      kernels::accumulate_rows(rows, dtype, H, tokens, n, a);
    }
    if (dtype == kernels::DType::kFloat32) return acc;
    at::Tensor out = at::empty({st.num_tokens, H}, y.options());
    kernels::convert_from_float(a, acc.numel(), dtype, out.data_ptr());
    return out;
  }

 private:
  static uint64_t tag(uint32_t seq, int src) { return (static_cast<uint64_t>(seq) << 24) | static_cast<uint64_t>(src); }
  size_t send_offset(int d) const { return static_cast<size_t>(d) * region_bytes_; }
  size_t recv_offset(int s) const { return static_cast<size_t>(num_ranks_ + s) * region_bytes_; }

  void write_header(uint8_t* msg, wire::Kind kind, uint32_t seq, int64_t rows, int64_t row_bytes, int64_t topk,
                    int64_t num_counts) const {
    wire::Header h{};
    h.magic = wire::kMagic;
    h.version = wire::kVersion;
    h.kind = static_cast<uint16_t>(kind);
    h.seq = seq;
    h.src = static_cast<uint32_t>(rank_);
    h.rows = static_cast<uint64_t>(rows);
    h.row_bytes = static_cast<uint32_t>(row_bytes);
    h.topk = static_cast<uint32_t>(topk);
    h.num_counts = static_cast<uint32_t>(num_counts);
    h.checksum = wire::header_checksum(h);
    std::memcpy(msg, &h, sizeof(h));
  }

  void check_header(const uint8_t* msg, int src, wire::Kind kind, uint32_t seq, int64_t row_bytes, int64_t topk,
                    int64_t num_counts) const {
    wire::Header h;
    std::memcpy(&h, msg, sizeof(h));
    const size_t got = ep_->received_bytes(src);
    std::string why;
    if (got < sizeof(h) || h.magic != wire::kMagic) why = "bad magic or short message";
    else if (h.version != wire::kVersion) why = "wire version " + std::to_string(h.version) + " (this build speaks " + std::to_string(wire::kVersion) + ")";
    else if (h.checksum != wire::header_checksum(h)) why = "header checksum mismatch";
    else if (h.kind != static_cast<uint16_t>(kind) || h.seq != seq || h.src != static_cast<uint32_t>(src))
      why = "kind/seq/src " + std::to_string(h.kind) + "/" + std::to_string(h.seq) + "/" + std::to_string(h.src) +
            " but expected " + std::to_string(static_cast<int>(kind)) + "/" + std::to_string(seq) + "/" + std::to_string(src);
    else if (h.row_bytes != row_bytes || h.topk != topk || h.num_counts != num_counts)
      why = "row_bytes/topk/counts " + std::to_string(h.row_bytes) + "/" + std::to_string(h.topk) + "/" +
            std::to_string(h.num_counts) + " but expected " + std::to_string(row_bytes) + "/" + std::to_string(topk) +
            "/" + std::to_string(num_counts);
    if (!why.empty()) {
      throw Error("ep fabric rank " + std::to_string(rank_) + ": message from rank " + std::to_string(src) + ": " + why,
                  "all ranks must run the same moerl build and make the same dispatch/combine calls with the same "
                  "hidden size and dtype",
                  ErrorCode::kInternal);
    }
  }

  const size_t region_bytes_;  // one region of buffers_, immutable after construction
  uint64_t seq_ = 0;
  std::unique_ptr<FabricEndpoint> ep_;
};

}  // namespace

std::shared_ptr<Group> fabric_group(const Config& cfg, int64_t num_experts) {
  return detail::make_world_group<FabricGroup>("fabric", cfg, num_experts);
}

std::shared_ptr<Group> fabric_group_in(const Config& cfg, int64_t num_experts, const detail::World& world) {
  cfg.validate(num_experts, world.world_size);
  return std::make_shared<FabricGroup>(cfg, num_experts, world);
}

}  // namespace moerl::ep
