// BufferLayout: sizes recomputed from the worst-case message of one source, the
// low-latency row bound checked against real send plans (never exceeded, and reached), and
// the input checks against the buffers.
#include "ep/buffer_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "base/error.h"
#include "ep/kernels/routing.h"
#include "ep/transport/wire.h"

namespace moerl::ep {
namespace {

struct Sizes {
  int64_t tokens, hidden, topk, experts;
  int ranks;
};

Config config(const Sizes& s, Mode mode) {
  Config cfg;
  cfg.mode = mode;
  cfg.max_tokens_per_rank = s.tokens;
  cfg.hidden = s.hidden;
  cfg.max_topk = s.topk;
  return cfg;
}

// Most rows one source sends one destination under a send plan.
int64_t max_rows_to_one_rank(const std::vector<int64_t>& idx, const Sizes& s, Mode mode) {
  kernels::Routing r = kernels::build_routing(idx.data(), nullptr, s.tokens, s.topk, s.experts, s.ranks,
                                              mode == Mode::kLowLatency);
  int64_t most = 0;
  for (int d = 0; d < s.ranks; ++d) most = std::max(most, r.rows_to(d));
  return most;
}

const std::vector<Sizes> kConfigs = {
    {4096, 7168, 8, 256, 8},  // E/R = 32 > K
    {64, 32, 8, 8, 8},        // one expert per rank: K rows per token would be 8x too many
    {16, 8, 2, 4, 2},         // E/R = K
    {100, 100, 6, 16, 4},     // E/R = 4 < K
};

TEST(BufferLayout, SizesHoldTheWorstMessageOfOneSource) {
  for (const Sizes& s : kConfigs) {
    for (Mode mode : {Mode::kNormal, Mode::kLowLatency}) {
      for (auto meta : {BufferLayout::Meta::kInline, BufferLayout::Meta::kSeparate}) {
        SCOPED_TRACE("T=" + std::to_string(s.tokens) + " K=" + std::to_string(s.topk) + " E=" +
                     std::to_string(s.experts) + " R=" + std::to_string(s.ranks) + " " + mode_name(mode));
        const BufferLayout b = BufferLayout::make(config(s, mode), s.experts, s.ranks, meta);
        const int64_t local = s.experts / s.ranks;
        const int64_t rows_per_token = mode == Mode::kNormal ? 1 : std::min(s.topk, local);
        EXPECT_EQ(b.max_rows, s.tokens * rows_per_token);
        EXPECT_EQ(b.max_row_bytes, s.hidden * 4);
        const bool inline_meta = meta == BufferLayout::Meta::kInline;
        EXPECT_EQ(b.meta_bytes_per_row, inline_meta ? 2 * s.topk * 4 : 0);
        EXPECT_EQ(b.header_bytes, inline_meta ? sizeof(wire::Header) + wire::align64(local * 8) : 0);
        const size_t need = b.header_bytes + b.max_rows * (s.hidden * 4 + b.meta_bytes_per_row);
        EXPECT_GE(b.region_bytes, need);
        EXPECT_LT(b.region_bytes, need + BufferLayout::kAlign);
        EXPECT_EQ(b.region_bytes % BufferLayout::kAlign, 0u);
        EXPECT_EQ(b.total_bytes, 2 * s.ranks * b.region_bytes);
      }
    }
  }
}

TEST(BufferLayout, LowLatencyRowBoundIsNeverExceededAndIsReached) {
  for (const Sizes& s : kConfigs) {
    if (s.tokens > 1000) continue;  // the plans below are O(T*K*R)
    SCOPED_TRACE("K=" + std::to_string(s.topk) + " E=" + std::to_string(s.experts) + " R=" + std::to_string(s.ranks));
    for (Mode mode : {Mode::kNormal, Mode::kLowLatency}) {
      const BufferLayout b = BufferLayout::make(config(s, mode), s.experts, s.ranks, BufferLayout::Meta::kInline);
      std::mt19937 rng(7);
      for (int trial = 0; trial < 20; ++trial) {  // random ids, duplicates and -1 included
        std::vector<int64_t> idx(s.tokens * s.topk);
        for (auto& e : idx) e = static_cast<int64_t>(rng() % (s.experts + 1)) - 1;
        EXPECT_LE(max_rows_to_one_rank(idx, s, mode), b.max_rows);
      }
      // Worst case: every token names the first min(K, E/R) experts of rank 0 (the rest of
      // its slots repeat them).
      const int64_t distinct = std::min(s.topk, s.experts / s.ranks);
      std::vector<int64_t> idx(s.tokens * s.topk);
      for (int64_t t = 0; t < s.tokens; ++t)
        for (int64_t k = 0; k < s.topk; ++k) idx[t * s.topk + k] = k % distinct;
      EXPECT_EQ(max_rows_to_one_rank(idx, s, mode), b.max_rows) << mode_name(mode);
    }
  }
}

TEST(BufferLayout, RejectsInputsTheBuffersWereNotSizedFor) {
  const BufferLayout b = BufferLayout::make(config({16, 8, 2, 4, 2}, Mode::kNormal), 4, 2, BufferLayout::Meta::kInline);
  EXPECT_NO_THROW(b.check_dispatch(16, 2, "fabric"));
  EXPECT_NO_THROW(b.check_row_bytes(8 * 4, "x", "fabric"));
  EXPECT_THROW(b.check_dispatch(16, 3, "fabric"), Error);
  EXPECT_THROW(b.check_row_bytes(8 * 4 + 1, "x", "fabric"), Error);
  try {
    b.check_dispatch(17, 2, "cuda_ipc");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("ep cuda_ipc: dispatch of T=17"), std::string::npos) << msg;
    EXPECT_NE(msg.find("max_tokens_per_rank=16"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace moerl::ep
