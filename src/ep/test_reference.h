// The reference model of the EP delivery tests: inputs whose payloads encode provenance
// (source rank, token index, small integers so bfloat16 and sums stay exact), and a plain
// recomputation of what each rank must receive and what combine returns to it. Every rank
// recomputes every rank's inputs, so delivery is checked exactly without communication.
//
//   Inputs in = make_inputs(c, rank, seed);  Expected ex = expect(c, rank, R, mode, seed);
//   check_case(group, c, mode, seed, "fabric");   // dispatch, combine, cached dispatch
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ep/ep.h"

namespace moerl::ep::testing {

enum class Routing { kUniform, kZipf, kOneExpert, kDropped };

struct Case {
  int64_t tokens, hidden, topk, experts;
  at::ScalarType dtype;
  Routing routing;
  int empty_rank;  // this rank has zero tokens (-1: none)
};

struct Inputs {
  at::Tensor x, idx, w;
};

// Deterministic inputs of `rank`; small integers so bfloat16 and sums stay exact.
inline Inputs make_inputs(const Case& c, int rank, uint64_t seed) {
  const int64_t T = rank == c.empty_rank ? 0 : c.tokens;
  at::manual_seed(seed * 1000 + rank);
  Inputs in;
  const int64_t E = c.experts, K = c.topk;
  switch (c.routing) {
    case Routing::kUniform:
    case Routing::kDropped:
      in.idx = std::get<1>(at::rand({T, E}).topk(K, 1));
      break;
    case Routing::kZipf: {
      at::Tensor p = 1.0 / (at::arange(E, at::kFloat) + 1);
      in.idx = T ? at::multinomial(p.expand({T, E}), K, false) : at::empty({0, K}, at::kLong);
      break;
    }
    case Routing::kOneExpert:
      in.idx = at::full({T, K}, -1, at::kLong);
      if (T) in.idx.select(1, 0).fill_(E - 1);
      break;
  }
  if (c.routing == Routing::kDropped && T) {
    in.idx = in.idx.masked_fill(at::rand({T, K}).lt(0.3), -1);
    in.idx.select(0, 0).fill_(-1);  // a token routed nowhere
  }
  in.w = at::rand({T, K}) + 0.1;
  at::Tensor t = at::arange(T, at::kLong).unsqueeze(1);
  at::Tensor j = at::arange(c.hidden, at::kLong).unsqueeze(0);
  at::Tensor x = (t * 11 + j * 5 + rank * 37) % 8;
  // Provenance columns: source rank, then the token index in base-8 digits.
  x.select(1, 0).fill_(rank);
  for (int d = 0; d < 4 && d + 1 < c.hidden; ++d) x.select(1, d + 1).copy_(t.squeeze(1).div(1 << (3 * d), "floor") % 8);
  in.x = x.to(c.dtype);
  return in;
}

struct Expected {
  at::Tensor recv_x, recv_idx, recv_w, combined;
  std::vector<int64_t> per_expert;
};

// Plain recomputation of what rank `me` receives and what combine(recv_x * (rank+1))
// returns to it.
inline Expected expect(const Case& c, int me, int R, Mode mode, uint64_t seed) {
  const int64_t El = c.experts / R, K = c.topk;
  std::vector<Inputs> all;
  for (int s = 0; s < R; ++s) all.push_back(make_inputs(c, s, seed));
  std::vector<at::Tensor> xs, is, ws;
  std::vector<int64_t> per_expert(El, 0);
  auto add_row = [&](int s, int64_t t, auto keep) {
    auto idx = all[s].idx[t];
    at::Tensor li = at::full({K}, -1, at::kLong), lw = at::zeros({K});
    for (int64_t k = 0; k < K; ++k) {
      int64_t e = idx[k].item<int64_t>();
      if (keep(e)) li[k] = e % El, lw[k] = all[s].w[t][k];
    }
    xs.push_back(all[s].x[t]);
    is.push_back(li);
    ws.push_back(lw);
    for (int64_t e = 0; e < El; ++e) per_expert[e] += li.eq(e).any().item<bool>();
  };
  if (mode == Mode::kNormal) {
    for (int s = 0; s < R; ++s)
      for (int64_t t = 0; t < all[s].x.size(0); ++t)
        if ((all[s].idx[t].ge(0) & all[s].idx[t].div(El, "floor").eq(me)).any().item<bool>())
          add_row(s, t, [&](int64_t e) { return e >= 0 && e / El == me; });
  } else {
    for (int64_t e = 0; e < El; ++e)
      for (int s = 0; s < R; ++s)
        for (int64_t t = 0; t < all[s].x.size(0); ++t)
          if (all[s].idx[t].eq(me * El + e).any().item<bool>())
            add_row(s, t, [&](int64_t g) { return g == me * El + e; });
  }
  Expected ex;
  ex.per_expert = per_expert;
  ex.recv_x = xs.empty() ? at::empty({0, c.hidden}, c.dtype) : at::stack(xs);
  ex.recv_idx = is.empty() ? at::empty({0, K}, at::kLong) : at::stack(is);
  ex.recv_w = ws.empty() ? at::empty({0, K}) : at::stack(ws);
  // combined[t] = x[t] * sum over the rows t was sent as of (destination rank + 1).
  const Inputs& mine = all[me];
  at::Tensor factor = at::zeros({mine.x.size(0), 1});
  for (int64_t t = 0; t < mine.x.size(0); ++t) {
    std::vector<int64_t> seen;
    for (int64_t k = 0; k < K; ++k) {
      int64_t e = mine.idx[t][k].item<int64_t>();
      if (e < 0) continue;
      int64_t key = mode == Mode::kNormal ? e / El : e;
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      factor[t][0] += static_cast<double>(e / El + 1);
    }
  }
  ex.combined = (mine.x.to(at::kFloat) * factor).to(c.dtype);
  return ex;
}

// Received rows, metadata and per-expert counts of a dispatch equal the reference.
inline void check_received(const Dispatched& d, const Expected& ex) {
  ASSERT_EQ(d.recv_x_NH.sizes(), ex.recv_x.sizes());
  EXPECT_TRUE(d.recv_x_NH.equal(ex.recv_x));
  EXPECT_TRUE(d.recv_topk_idx_NK.equal(ex.recv_idx));
  EXPECT_TRUE(d.recv_topk_weights_NK.equal(ex.recv_w));
  EXPECT_EQ(d.num_recv_tokens_per_expert, ex.per_expert);
}

// Dispatch, combine(recv_x * (rank+1)) and a cached dispatch of 2x, each checked exactly.
inline void check_case(Group& g, const Case& c, Mode mode, uint64_t seed, const char* what) {
  SCOPED_TRACE(std::string(what) + " T=" + std::to_string(c.tokens) + " H=" + std::to_string(c.hidden) + " K=" +
               std::to_string(c.topk) + " E=" + std::to_string(c.experts) + " mode=" + mode_name(mode));
  const int me = g.rank(), R = g.world_size();
  Inputs in = make_inputs(c, me, seed);
  Expected ex = expect(c, me, R, mode, seed);
  Layout l = g.get_dispatch_layout(in.idx, c.experts);
  Dispatched d = g.dispatch(in.x, in.idx, in.w, l);
  check_received(d, ex);
  at::Tensor y = g.combine(d.recv_x_NH * (me + 1), d.handle);
  EXPECT_TRUE(y.equal(ex.combined));
  // Cached dispatch: same routing, new payload, no metadata sent.
  Dispatched d2 = g.dispatch(in.x * 2, at::Tensor(), at::Tensor(), Layout{}, &d.handle);
  EXPECT_TRUE(d2.recv_x_NH.equal(ex.recv_x * 2));
  EXPECT_TRUE(d2.recv_topk_idx_NK.equal(ex.recv_idx));
}

inline std::vector<Case> small_cases() {
  return {
      {64, 16, 4, 8, at::kFloat, Routing::kUniform, -1},
      {48, 24, 8, 256, at::kBFloat16, Routing::kZipf, -1},
      {40, 8, 2, 16, at::kFloat, Routing::kOneExpert, -1},
      {50, 12, 3, 8, at::kBFloat16, Routing::kDropped, 1},
  };
}

}  // namespace moerl::ep::testing
