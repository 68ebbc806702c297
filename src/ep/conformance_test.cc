// The conformance harness (conformance.h) and the delivery contracts, run on every CPU
// backend: exact delivery of provenance-encoded payloads (test_reference.h) in both modes
// with edge cases (a rank with zero tokens, all tokens to one expert, -1 entries, top-8,
// 256 experts, hidden 7168), bit-identical repeats, independent handles, and input checks.
#include "ep/conformance.h"

#include <cstdlib>
#include <map>

#include "base/error.h"
#include "ep/test_ranks.h"
#include "ep/test_reference.h"

namespace moerl::ep::testing {

namespace {

std::map<std::string, Contract>& contracts() {
  static std::map<std::string, Contract> m;
  return m;
}

}  // namespace

RegisterContract::RegisterContract(const char* name, Contract fn) { contracts()[name] = fn; }

std::vector<Mode> modes(Backend b) {
  if (b == Backend::kLoopback) return {Mode::kNormal};
  return {Mode::kNormal, Mode::kLowLatency};
}

Config config(Backend b, Mode m, int64_t max_tokens, int64_t hidden, int64_t max_topk) {
  Config cfg;
  cfg.backend = b;
  cfg.mode = m;
  cfg.max_tokens_per_rank = max_tokens;
  cfg.hidden = hidden;
  cfg.max_topk = max_topk;
  cfg.timeout_s = 60;
  return cfg;
}

void run_contract(const std::string& name, const BackendParam& p) {
  ASSERT_TRUE(contracts().count(name)) << "unknown contract " << name;
  if (p.ranks == 1) return contracts()[name](p.backend);
  std::map<std::string, std::string> env{{"MOERL_EP_CONTRACT", name}, {"MOERL_EP_BACKEND", backend_name(p.backend)}};
  if (p.provider) env["FI_PROVIDER"] = p.provider;
  if (p.local_world_size) env["LOCAL_WORLD_SIZE"] = std::to_string(p.local_world_size);
  EXPECT_EQ(run_ranks("conformance", p.ranks, env), std::vector<int>(p.ranks, 0));
}

// A rank started by run_contract: the contract and backend come from its environment.
MOERL_EP_SCENARIO(conformance) {
  const char* name = std::getenv("MOERL_EP_CONTRACT");
  const char* backend = std::getenv("MOERL_EP_BACKEND");
  ASSERT_TRUE(name && backend && contracts().count(name)) << "bad MOERL_EP_CONTRACT/MOERL_EP_BACKEND";
  contracts()[name](parse_backend(backend));
}

INSTANTIATE_TEST_SUITE_P(Backends, EpConformance,
                         ::testing::Values(BackendParam{Backend::kLoopback, 1, nullptr},
                                           BackendParam{Backend::kFabric, 2, "shm"},
                                           BackendParam{Backend::kFabric, 2, "tcp"},
                                           BackendParam{Backend::kFabric, 4, "shm"},
                                           BackendParam{Backend::kFabric, 4, "tcp"},
                                           BackendParam{Backend::kAllToAll, 2, nullptr},
                                           BackendParam{Backend::kAllToAll, 4, nullptr},
                                           // intra fabric/shm, inter fabric/tcp (FI_PROVIDER unset: libfabric
                                           // would load only the one it names): 2 nodes of 2, 2 of 1, 1 of 4
                                           BackendParam{Backend::kHierarchical, 4, nullptr, 2},
                                           BackendParam{Backend::kHierarchical, 2, nullptr, 1},
                                           BackendParam{Backend::kHierarchical, 4, nullptr, 4}),
                         [](const ::testing::TestParamInfo<BackendParam>& info) {
                           const BackendParam& p = info.param;
                           std::string s = std::string(backend_name(p.backend)) + "_" + std::to_string(p.ranks) + "ranks";
                           if (p.provider) s += std::string("_") + p.provider;
                           if (p.local_world_size) s += "_" + std::to_string(p.ranks / p.local_world_size) + "x" +
                                                        std::to_string(p.local_world_size);
                           return s;
                         });

namespace {

EP_CONTRACT(Delivery) {
  for (Mode mode : modes(backend)) {
    for (const Case& c : small_cases()) {
      auto g = make_group(config(backend, mode, 64, 32), c.experts);
      check_case(*g, c, mode, 1, backend_name(backend));
    }
  }
}

EP_CONTRACT(LargeHidden) {
  for (Mode mode : modes(backend)) {
    auto g = make_group(config(backend, mode, 8, 7168), 64);
    check_case(*g, {6, 7168, 8, 64, at::kBFloat16, Routing::kUniform, -1}, mode, 2, "big hidden");
  }
}

// Random (non-integer) payloads: repeated runs give identical bytes (a fixed summation order).
EP_CONTRACT(RepeatsAreBitIdentical) {
  for (Mode mode : modes(backend)) {
    SCOPED_TRACE(mode_name(mode));
    auto g = make_group(config(backend, mode, 64, 32), 256);
    at::manual_seed(100 + g->rank());
    at::Tensor x = at::randn({64, 32});
    at::Tensor idx = std::get<1>(at::rand({64, 256}).topk(8, 1));
    at::Tensor w = at::rand({64, 8});
    at::Tensor first_recv, first_y;
    for (int rep = 0; rep < 3; ++rep) {
      Dispatched d = g->dispatch(x, idx, w, g->get_dispatch_layout(idx, 256));
      at::Tensor y = g->combine(d.recv_x_NH * 1.37 + 0.01, d.handle);
      if (rep == 0) {
        first_recv = d.recv_x_NH, first_y = y;
      } else {
        EXPECT_TRUE(d.recv_x_NH.equal(first_recv));
        EXPECT_TRUE(y.equal(first_y)) << "repeat " << rep << " differs";
      }
    }
  }
}

// Two dispatches in flight: combine and cached dispatch of the older one after the newer
// one (as backward runs layers in reverse) still use the older routing.
EP_CONTRACT(HandlesAreIndependent) {
  for (Mode mode : modes(backend)) {
    SCOPED_TRACE(mode_name(mode));
    const Case a = small_cases()[0], b = small_cases()[3];
    auto g = make_group(config(backend, mode, 64, 32), a.experts);
    const int me = g->rank(), R = g->world_size();
    Inputs ia = make_inputs(a, me, 3), ib = make_inputs(b, me, 4);
    Expected ea = expect(a, me, R, mode, 3), eb = expect(b, me, R, mode, 4);
    Dispatched da = g->dispatch(ia.x, ia.idx, ia.w, g->get_dispatch_layout(ia.idx, a.experts));
    Dispatched db = g->dispatch(ib.x, ib.idx, ib.w, g->get_dispatch_layout(ib.idx, b.experts));
    check_received(db, eb);
    EXPECT_TRUE(g->combine(db.recv_x_NH * (me + 1), db.handle).equal(eb.combined));
    Dispatched da2 = g->dispatch(ia.x * 2, at::Tensor(), at::Tensor(), Layout{}, &da.handle);
    EXPECT_TRUE(da2.recv_x_NH.equal(ea.recv_x * 2));
    check_received(da, ea);
    EXPECT_TRUE(g->combine(da.recv_x_NH * (me + 1), da.handle).equal(ea.combined));
  }
}

// Bad inputs throw moerl::Error before anything is sent, so every rank throws alike and
// the group stays usable.
EP_CONTRACT(RejectsBadInputs) {
  for (Mode mode : modes(backend)) {
    SCOPED_TRACE(mode_name(mode));
    auto g = make_group(config(backend, mode, 16, 8), 4);
    at::Tensor idx = at::zeros({3, 2}, at::kLong);
    at::Tensor w = at::ones({3, 2});
    Layout l = g->get_dispatch_layout(idx, 4);
    EXPECT_THROW(g->dispatch(at::zeros({3, 4}, at::kInt), idx, w, l), Error);
    EXPECT_THROW(g->dispatch(at::zeros({2, 4}), idx, w, l), Error);
    EXPECT_THROW(g->dispatch(at::zeros({3, 4}), idx, at::ones({3, 1}), l), Error);
    EXPECT_THROW(g->dispatch(at::zeros({3, 4}), at::full({3, 2}, 4, at::kLong), w, Layout{}), Error);
    EXPECT_THROW(g->dispatch(at::zeros({3, 4}), idx.to(at::kInt), w, Layout{}), Error);
    EXPECT_THROW(g->get_dispatch_layout(idx, 8), Error);
    EXPECT_THROW(g->combine(at::zeros({3, 4}), Handle{}), Error);
    at::Tensor x = at::arange(12, at::kFloat).view({3, 4}) + 100 * g->rank();
    Dispatched d = g->dispatch(x, idx, w, l);
    EXPECT_THROW(g->combine(at::zeros({d.handle.num_recv + 1, 4}), d.handle), Error);
    EXPECT_THROW(g->combine(at::zeros({d.handle.num_recv, 4}, at::kInt), d.handle), Error);
    EXPECT_THROW(g->dispatch(x.narrow(0, 0, 2), at::Tensor(), at::Tensor(), Layout{}, &d.handle), Error);
    EXPECT_TRUE(g->combine(d.recv_x_NH, d.handle).equal(x));  // each token reached expert 0 once
  }
}

}  // namespace
}  // namespace moerl::ep::testing
