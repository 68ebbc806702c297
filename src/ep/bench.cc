// EP benchmark: deterministic provenance inputs per rank, a vectorized reference of what
// each rank must receive and get back, verification, warm-up, medians, GB/s, memcpy.
#include "ep/bench.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/deadline.h"
#include "base/error.h"
#include "ep/hier/hier_group.h"

namespace moerl::ep {
namespace {

struct Inputs {
  at::Tensor x, idx, w;
};

Inputs make_inputs(const BenchOptions& o, int rank) {
  at::manual_seed(o.seed * 7919 + rank);
  const int64_t T = o.tokens, E = o.experts, K = o.topk, H = o.hidden;
  Inputs in;
  if (o.routing == "uniform" || o.routing == "dropped") {
    in.idx = std::get<1>(at::rand({T, E}).topk(K, 1));
    if (o.routing == "dropped") in.idx = in.idx.masked_fill(at::rand({T, K}).lt(0.3), -1);
  } else if (o.routing == "zipf") {
    at::Tensor p = 1.0 / (at::arange(E, at::kFloat) + 1);
    in.idx = at::multinomial(p.expand({T, E}), K, false);
  } else if (o.routing == "one-expert") {
    in.idx = at::full({T, K}, -1, at::kLong);
    in.idx.select(1, 0).fill_(E - 1);
  } else {
    throw Error("bench ep: --routing " + o.routing + " is not one of uniform|zipf|one-expert|dropped",
                "e.g. --routing zipf");
  }
  in.w = at::rand({T, K}) + 0.1;
  // Small integers (exact in bfloat16 and in sums); columns 0..4: source rank, token digits.
  at::Tensor t = at::arange(T, at::kLong).unsqueeze(1);
  at::Tensor x = (t * 11 + at::arange(H, at::kLong).unsqueeze(0) * 5 + rank * 37) % 8;
  x.select(1, 0).fill_(rank);
  for (int d = 0; d < 4 && d + 1 < H; ++d) x.select(1, d + 1).copy_(t.squeeze(1).div(1 << (3 * d), "floor") % 8);
  in.x = x.to(o.dtype == DType::kFloat32 ? at::kFloat : at::kBFloat16);
  return in;
}

struct Reference {
  at::Tensor recv_x, recv_idx, recv_w, combined;
  std::vector<int64_t> per_expert;
};

Reference reference(const BenchOptions& o, int me, int R) {
  const int64_t El = o.experts / R;
  std::vector<Inputs> all;
  for (int s = 0; s < R; ++s) all.push_back(make_inputs(o, s));
  std::vector<at::Tensor> xs, is, ws;
  auto take = [&](const Inputs& in, const at::Tensor& keep_TK) {
    at::Tensor rows = keep_TK.any(1).nonzero().select(1, 0);
    xs.push_back(in.x.index_select(0, rows));
    is.push_back(at::where(keep_TK, in.idx.remainder(El), at::full_like(in.idx, -1)).index_select(0, rows));
    ws.push_back(at::where(keep_TK, in.w, at::zeros_like(in.w)).index_select(0, rows));
  };
  if (o.mode == Mode::kNormal) {
    for (int s = 0; s < R; ++s) take(all[s], all[s].idx.ge(0) & all[s].idx.div(El, "floor").eq(me));
  } else {
    for (int64_t e = 0; e < El; ++e)
      for (int s = 0; s < R; ++s) take(all[s], all[s].idx.eq(me * El + e));
  }
  Reference ref;
  ref.recv_x = at::cat(xs);
  ref.recv_idx = at::cat(is);
  ref.recv_w = at::cat(ws);
  for (int64_t e = 0; e < El; ++e) ref.per_expert.push_back(ref.recv_idx.eq(e).any(1).sum().item<int64_t>());
  // combine(recv_x) returns x[t] times the number of rows t was sent as.
  const Inputs& mine = all[me];
  at::Tensor copies;
  if (o.mode == Mode::kNormal) {
    at::Tensor owner = at::where(mine.idx.ge(0), mine.idx.div(El, "floor"), at::full_like(mine.idx, -1));
    copies = at::zeros({o.tokens}, at::kLong);
    for (int r = 0; r < R; ++r) copies += owner.eq(r).any(1).to(at::kLong);
  } else {
    at::Tensor sorted = std::get<0>(mine.idx.sort(1));
    at::Tensor distinct = sorted.ge(0);
    if (o.topk > 1) distinct.narrow(1, 1, o.topk - 1) &= sorted.narrow(1, 1, o.topk - 1).ne(sorted.narrow(1, 0, o.topk - 1));
    copies = distinct.sum(1);
  }
  ref.combined = (mine.x.to(at::kFloat) * copies.unsqueeze(1).to(at::kFloat)).to(mine.x.scalar_type());
  return ref;
}

void verify(const char* backend, int rank, const Dispatched& dev, const at::Tensor& y_dev, const Reference& ref) {
  Dispatched d = dev;
  d.recv_x_NH = dev.recv_x_NH.cpu();
  d.recv_topk_idx_NK = dev.recv_topk_idx_NK.cpu();
  d.recv_topk_weights_NK = dev.recv_topk_weights_NK.cpu();
  const at::Tensor y = y_dev.cpu();
  auto fail = [&](const std::string& what) {
    throw Error(std::string("bench ep: backend ") + backend + " on rank " + std::to_string(rank) + ": " + what +
                    " differs from the reference",
                "this is a bug in the EP transport; rerun the ep tests", ErrorCode::kInternal);
  };
  if (!d.recv_x_NH.sizes().equals(ref.recv_x.sizes()) || !d.recv_x_NH.equal(ref.recv_x)) fail("recv_x");
  if (!d.recv_topk_idx_NK.equal(ref.recv_idx)) fail("recv_topk_idx");
  if (!d.recv_topk_weights_NK.equal(ref.recv_w)) fail("recv_topk_weights");
  if (d.num_recv_tokens_per_expert != ref.per_expert) fail("num_recv_tokens_per_expert");
  if (!y.equal(ref.combined)) fail("combine output");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Waits for the work queued on t's device (a one-element copy to the host is ordered after
// it); CPU tensors are done already.
void sync_device(const at::Tensor& t) {
  if (t.defined() && t.is_cuda()) at::empty({1}, t.options()).cpu();
}

// Copy bandwidth on the GPU: bytes read (= bytes written) per second of a device copy.
double device_copy_gbps(int64_t bytes, const at::TensorOptions& opt) {
  bytes = std::max<int64_t>(bytes, 256 << 20);
  at::Tensor a = at::ones({bytes}, opt.dtype(at::kByte)), b = at::empty_like(a);
  std::vector<double> t;
  for (int i = 0; i < 9; ++i) {
    sync_device(a);
    double t0 = now_seconds();
    b.copy_(a);
    sync_device(b);
    t.push_back(now_seconds() - t0);
  }
  return bytes / median(t) / 1e9;
}

double memcpy_gbps(int64_t bytes) {
  bytes = std::max<int64_t>(bytes, 64 << 20);
  std::vector<uint8_t> a(bytes, 1), b(bytes, 2);
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    double t0 = now_seconds();
    std::memcpy(b.data(), a.data(), bytes);
    t.push_back(now_seconds() - t0);
    a[i] = b[bytes - 1 - i];  // keep the copies observable
  }
  return bytes / median(t) / 1e9;
}

}  // namespace

nlohmann::json run_bench(const BenchOptions& o) {
  at::set_num_threads(1);
  if (o.dtype != DType::kBFloat16 && o.dtype != DType::kFloat32) {
    throw Error(std::string("bench ep: dtype ") + dtype_name(o.dtype) + " is not bfloat16 or float32", "e.g. --dtype bf16");
  }
  if (o.tokens < 1 || o.hidden < 5 || o.topk < 1 || o.topk > o.experts || o.iters < 1) {
    throw Error("bench ep: need --tokens >= 1, --hidden >= 5, 1 <= --topk <= --experts, --iters >= 1 (got tokens=" +
                    std::to_string(o.tokens) + " hidden=" + std::to_string(o.hidden) + " topk=" + std::to_string(o.topk) +
                    " experts=" + std::to_string(o.experts) + ")",
                "e.g. --tokens 4096 --hidden 2048 --topk 8 --experts 64");
  }
  nlohmann::json out;
  out["tokens"] = o.tokens, out["hidden"] = o.hidden, out["topk"] = o.topk, out["experts"] = o.experts;
  out["dtype"] = dtype_short_name(o.dtype), out["routing"] = o.routing, out["mode"] = mode_name(o.mode);
  out["warmup"] = o.warmup, out["iters"] = o.iters, out["device"] = o.device;
  if (o.device != "cpu" && o.device != "cuda") {
    throw Error("bench ep: --device " + o.device + " is not cpu or cuda", "e.g. --device cuda --backend cuda_ipc,nccl");
  }
  const at::TensorOptions dev = at::TensorOptions().device(o.device == "cuda" ? at::kCUDA : at::kCPU);
  std::map<Backend, double> totals;
  int64_t recv_bytes = 0;
  for (Backend b : o.backends) {
    Config cfg;
    cfg.backend = b;
    cfg.mode = o.mode;
    cfg.provider = o.provider;
    cfg.max_tokens_per_rank = o.tokens;
    cfg.hidden = o.hidden;
    cfg.max_topk = o.topk;
    cfg.timeout_s = o.timeout_s;
    auto g = make_group(cfg, o.experts);
    out["ranks"] = g->world_size();
    const int me = g->rank();
    Inputs in = make_inputs(o, me);
    Reference ref = reference(o, me, g->world_size());
    in.x = in.x.to(dev.device()), in.idx = in.idx.to(dev.device()), in.w = in.w.to(dev.device());
    Layout layout = g->get_dispatch_layout(in.idx, o.experts);
    {
      Dispatched d = g->dispatch(in.x, in.idx, in.w, layout);
      verify(backend_name(b), me, d, g->combine(d.recv_x_NH, d.handle), ref);
    }
    nlohmann::json r;
    if (b == Backend::kHierarchical) {  // what one dispatch sent between nodes, this rank
      const hier::HierStats s = hier::hier_stats(*g);
      const hier::NodeTopology t = hier::hier_topology(*g);
      r["nodes"] = std::to_string(t.num_nodes) + "x" + std::to_string(t.local_world_size);
      r["inter_rows"] = s.inter_rows;
      r["flat_inter_rows"] = s.flat_inter_rows;
      r["inter_payload_bytes"] = s.inter_payload_bytes;
    }
    std::vector<double> td, tc, tt;
    for (int it = 0; it < o.warmup + o.iters; ++it) {
      sync_device(in.x);
      const double t0 = now_seconds();
      Dispatched d = g->dispatch(in.x, in.idx, in.w, layout);
      sync_device(d.recv_x_NH);
      const double t1 = now_seconds();
      at::Tensor y = g->combine(d.recv_x_NH, d.handle);
      sync_device(y);
      const double t2 = now_seconds();
      if (it >= o.warmup) td.push_back(t1 - t0), tc.push_back(t2 - t1), tt.push_back(t2 - t0);
      if (it == o.warmup + o.iters - 1) verify(backend_name(b), me, d, y, ref);  // still right after timing
    }
    recv_bytes = ref.recv_x.numel() * ref.recv_x.element_size();
    r["dispatch_ms"] = median(td) * 1e3;
    r["combine_ms"] = median(tc) * 1e3;
    r["total_ms"] = median(tt) * 1e3;
    r["recv_bytes"] = recv_bytes;
    r["dispatch_gbps"] = recv_bytes / median(td) / 1e9;
    r["combine_gbps"] = recv_bytes / median(tc) / 1e9;
    r["verified"] = true;
    out["backends"][backend_name(b)] = r;
    totals[b] = median(tt);
  }
  out["memcpy_gbps"] = o.device == "cuda" ? device_copy_gbps(recv_bytes, dev) : memcpy_gbps(recv_bytes);
  // ratio = baseline time / ours: alltoall vs fabric on hosts, nccl vs cuda_ipc on GPUs, and
  // flat fabric vs hierarchical (the last pair present wins).
  out["ratio"] = nullptr;
  for (auto [ours, baseline] : {std::pair{Backend::kFabric, Backend::kAllToAll}, std::pair{Backend::kCudaIpc, Backend::kNccl},
                                std::pair{Backend::kHierarchical, Backend::kFabric}}) {
    if (totals.count(ours) && totals.count(baseline)) {
      out["ratio"] = totals[baseline] / totals[ours];
      out["ratio_of"] = std::string(backend_name(baseline)) + "/" + backend_name(ours);
    }
  }
  return out;
}

std::string bench_table(const nlohmann::json& r) {
  char line[256];
  std::string s;
  std::snprintf(line, sizeof(line), "ep bench: ranks=%d T=%lld H=%lld K=%lld E=%lld %s routing=%s mode=%s (median of %d)\n",
                r["ranks"].get<int>(), (long long)r["tokens"].get<int64_t>(), (long long)r["hidden"].get<int64_t>(),
                (long long)r["topk"].get<int64_t>(), (long long)r["experts"].get<int64_t>(),
                r["dtype"].get<std::string>().c_str(), r["routing"].get<std::string>().c_str(),
                r["mode"].get<std::string>().c_str(), r["iters"].get<int>());
  s += line;
  s += "backend     dispatch_ms  combine_ms  total_ms  dispatch_GB/s  combine_GB/s  verified\n";
  for (auto& [name, b] : r["backends"].items()) {
    std::snprintf(line, sizeof(line), "%-10s  %11.3f  %10.3f  %8.3f  %13.2f  %12.2f  %s\n", name.c_str(),
                  b["dispatch_ms"].get<double>(), b["combine_ms"].get<double>(), b["total_ms"].get<double>(),
                  b["dispatch_gbps"].get<double>(), b["combine_gbps"].get<double>(), b["verified"].get<bool>() ? "yes" : "NO");
    s += line;
  }
  for (auto& [name, b] : r["backends"].items()) {
    if (!b.contains("inter_rows")) continue;
    std::snprintf(line, sizeof(line), "%s (nodes %s, rank 0): %lld rows per dispatch to other nodes, a flat dispatch sends %lld\n",
                  name.c_str(), b["nodes"].get<std::string>().c_str(), (long long)b["inter_rows"].get<int64_t>(),
                  (long long)b["flat_inter_rows"].get<int64_t>());
    s += line;
  }
  const bool gpu = r.value("device", "cpu") == "cuda";
  std::snprintf(line, sizeof(line), "%s (same run): %.2f GB/s\n", gpu ? "GPU device-to-device copy" : "memcpy, one core",
                r["memcpy_gbps"].get<double>());
  s += line;
  if (!r["ratio"].is_null()) {
    std::snprintf(line, sizeof(line), "ratio %s (dispatch+combine): %.2fx\n", r["ratio_of"].get<std::string>().c_str(),
                  r["ratio"].get<double>());
    s += line;
  }
  return s;
}

}  // namespace moerl::ep
