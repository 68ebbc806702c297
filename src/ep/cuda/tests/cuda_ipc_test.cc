// cuda_ipc EP transport with 2 and 4 ranks (processes) sharing one GPU (and the fabric
// transport with GPU payloads, staged through the host, with 2; and the hierarchical group,
// cuda_ipc within a node and fabric/tcp between nodes, as 2 nodes of 2 and 2 nodes of 1):
// the parent test re-executes this binary per rank (worker test selected by filter, TCPStore
// rendezvous on 127.0.0.1) and waits with a deadline. Each rank checks dispatch -> expert ->
// combine against the closed form, in normal and low-latency mode, fresh and cached, bf16 and f32,
// and 24 operations back to back without a host read between them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "ep/cuda/cuda_ipc_group.h"
#include "ep/cuda/nccl_group.h"
#include "ep/hier/hier_group.h"
#include "ep/torch/world.h"
#include "train/dp_sync.h"

namespace moerl::ep {
namespace {

// Exit codes of `world` ranks of the worker test; -1 for a rank killed at the deadline.
// local_world_size > 0: nodes of that many ranks (LOCAL_WORLD_SIZE, LOCAL_RANK = rank % it),
// as `moerl launch --nproc-per-node` sets them; 0: one node of every rank.
std::vector<int> run_ranks(int world, int port, double timeout_s, bool one_gpu_each = false,
                           const char* backend = "cuda_ipc", int local_world_size = 0) {
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(local_world_size > 0 ? r % local_world_size : r).c_str(), 1);
      if (local_world_size > 0) setenv("LOCAL_WORLD_SIZE", std::to_string(local_world_size).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      setenv("MOERL_CUDA_IPC_WORKER", one_gpu_each ? "spread" : "1", 1);
      setenv("MOERL_EP_TEST_BACKEND", backend, 1);
      // fabric (and hierarchical's inter-node hop): tcp on loopback. hierarchical's intra-node
      // hop is cuda_ipc here (the worker registers it), so no shm provider is needed.
      setenv("FI_PROVIDER", "tcp", 1);
      setenv("FI_TCP_IFACE", "lo", 1);
      execl("/proc/self/exe", "moerl_gpu_tests", "--gtest_filter=CudaIpcWorker.*", static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(world, -1);
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int left = world;
  while (left > 0 && std::chrono::steady_clock::now() < end) {
    for (int r = 0; r < world; ++r) {
      if (codes[r] != -1 || pids[r] == 0) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        codes[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        pids[r] = 0;
        --left;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int r = 0; r < world; ++r)
    if (pids[r] != 0) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], nullptr, 0);
    }
  return codes;
}

TEST(CudaIpc, TwoRanksOneGpu) { EXPECT_EQ(run_ranks(2, 29000 + getpid() % 2000, 120), std::vector<int>(2, 0)); }
// Ranks sharing a GPU wait by polling from the host (auto); the GPU-polled waits of ranks on
// separate GPUs, forced here, must give the same results on one GPU too.
TEST(CudaIpc, TwoRanksOneGpuWaitingOnTheGpu) {
  setenv("MOERL_CUDA_IPC_WAIT", "gpu", 1);
  EXPECT_EQ(run_ranks(2, 47000 + getpid() % 2000, 120), std::vector<int>(2, 0));
  unsetenv("MOERL_CUDA_IPC_WAIT");
}
TEST(CudaIpc, FourRanksOneGpu) { EXPECT_EQ(run_ranks(4, 31000 + getpid() % 2000, 180), std::vector<int>(4, 0)); }
// A rank that never dispatches: the other's dispatch ends at cfg.timeout_s (the GPU's wait on
// the peer's flag gives up) with an error naming the silent rank, and both ranks exit cleanly.
TEST(CudaIpc, ASilentPeerIsNamedAtTheDeadline) {
  EXPECT_EQ(run_ranks(2, 45000 + getpid() % 2000, 90, false, "cuda_ipc_silent_peer"), std::vector<int>(2, 0));
  setenv("MOERL_CUDA_IPC_WAIT", "gpu", 1);  // the wait kernel's own deadline
  EXPECT_EQ(run_ranks(2, 49000 + getpid() % 2000, 90, false, "cuda_ipc_silent_peer"), std::vector<int>(2, 0));
  unsetenv("MOERL_CUDA_IPC_WAIT");
}
// One rank per GPU: the writes cross NVLink (peer mappings between devices).
TEST(CudaIpc, OneRankPerGpu) {
  const int n = static_cast<int>(c10::cuda::device_count());
  if (n < 2) GTEST_SKIP() << "needs 2 or more GPUs (found " << n << ")";
  EXPECT_EQ(run_ranks(n, 33000 + getpid() % 2000, 180, true), std::vector<int>(n, 0));
}

// The libfabric backend with payloads on the GPU (staged through host memory): the same
// checks as cuda_ipc, so its results equal the single-rank block's closed form.
TEST(FabricGpu, TwoRanksOneGpuHostStaged) {
  EXPECT_EQ(run_ranks(2, 35000 + getpid() % 2000, 120, false, "fabric"), std::vector<int>(2, 0));
}
// The all-to-all baseline (c10d Gloo) likewise, so `bench rl-ep` can compare with it on a GPU
// whose ranks share it (NCCL refuses two ranks on one GPU).
TEST(AllToAllGpu, TwoRanksOneGpuHostStaged) {
  EXPECT_EQ(run_ranks(2, 41000 + getpid() % 2000, 120, false, "alltoall"), std::vector<int>(2, 0));
}

// The hierarchical group on GPU tensors: the intra-node hop is cuda_ipc (ranks sharing the
// GPU), the inter-node hop fabric over tcp with host staging; the same closed-form checks.
TEST(HierGpu, FourRanksOneGpuAsTwoNodesOfTwo) {
  EXPECT_EQ(run_ranks(4, 37000 + getpid() % 2000, 180, false, "hierarchical", 2), std::vector<int>(4, 0));
}
// One rank per node: the intra hop is the in-process loopback, every token crosses fabric.
TEST(HierGpu, TwoRanksOneGpuAsTwoNodesOfOne) {
  EXPECT_EQ(run_ranks(2, 39000 + getpid() % 2000, 120, false, "hierarchical", 1), std::vector<int>(2, 0));
}

// A data-parallel trainer group's dense gradients on GPUs go through NCCL (the device
// collective job::enable_gpu_paths registers), not host memory: every rank ends with the
// mean. NCCL refuses two ranks on one GPU, so this needs one GPU per rank.
TEST(DataParallelGpu, DenseGradientsAreAveragedOnTheDeviceOneRankPerGpu) {
  const int n = static_cast<int>(c10::cuda::device_count());
  if (n < 2) GTEST_SKIP() << "needs 2 or more GPUs (found " << n << "): NCCL refuses two ranks on one GPU";
  EXPECT_EQ(run_ranks(n, 43000 + getpid() % 2000, 180, true, "dp"), std::vector<int>(n, 0));
}

// The rank side of DataParallelGpu.*: gradients rank + 1 average to (R + 1) / 2 on the GPU.
void check_dense_gradients_on_the_device(int rank) {
  register_device_allreduce(&nccl_allreduce);  // what job::enable_gpu_paths registers
  std::shared_ptr<train::DataParallel> dp = train::DataParallel::join(60);
  const int R = dp->world_size();
  at::Tensor p = at::zeros({1000}, at::TensorOptions().device(at::kCUDA)).requires_grad_(true);
  p.mutable_grad() = at::full({1000}, rank + 1.0, p.options());
  const double norm = dp->sync_gradients({{"model.layers.0.self_attn.q_proj.weight", p}}, 0);
  const double mean = (R + 1) / 2.0;
  EXPECT_TRUE(p.grad().is_cuda());
  EXPECT_EQ(p.grad().min().item<double>(), mean);
  EXPECT_EQ(p.grad().max().item<double>(), mean);
  EXPECT_NEAR(norm, mean * std::sqrt(1000.0), 1e-3);
  EXPECT_EQ(dp->device_allreduces(), 1) << "the dense gradient went through host memory";
}

// The rank side of CudaIpc.ASilentPeerIsNamedAtTheDeadline: rank 1 joins and leaves, rank 0
// dispatches and must get a timeout naming rank 1 within its deadline.
void check_silent_peer_is_named(int rank) {
  Config cfg;
  cfg.max_tokens_per_rank = 64;
  cfg.hidden = 64;
  cfg.max_topk = 2;
  cfg.timeout_s = 3;
  auto g = cuda_ipc_group(cfg, 4);
  if (rank != 0) return;
  auto opt = at::TensorOptions().device(at::kCUDA);
  at::Tensor x = at::randn({8, 64}, opt), idx = at::arange(16, opt.dtype(at::kLong)).remainder(4).view({8, 2});
  at::Tensor w = at::ones({8, 2}, opt);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    g->dispatch(x, idx, w, g->get_dispatch_layout(idx, 4));
    ADD_FAILURE() << "dispatch returned though rank 1 never dispatched";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1's dispatch rows did not come within 3"), std::string::npos) << e.what();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(s, 2.5);
  EXPECT_LT(s, 30);
}

double rel_err(const at::Tensor& out, const at::Tensor& ref) {
  at::Tensor o = out.to(at::kCPU, at::kDouble), r = ref.to(at::kCPU, at::kDouble);
  return (o - r).norm().item<double>() / std::max(r.norm().item<double>(), 1e-30);
}

// Many operations back to back with no host read between them: the "free" flags must keep a
// writer from overwriting regions its reader has not read yet. Fresh and cached dispatches
// alternate; every output is checked at the end.
void check_back_to_back(Group& g, Mode mode, int rank, int64_t E, int64_t K) {
  auto opt = at::TensorOptions().device(at::kCUDA);
  std::vector<at::Tensor> outs, refs;
  std::optional<Dispatched> last;
  at::Tensor idx, w;
  int64_t T = 0;
  for (int it = 0; it < 24; ++it) {
    at::manual_seed(1000 * it + rank);
    const bool cached = it % 3 != 0;  // a fresh plan, then two dispatches of new rows on it
    if (!cached) {
      T = 40 + 13 * ((rank + it) % 5);
      idx = at::rand({T, E}).argsort(int64_t{1}, false).narrow(1, 0, K).contiguous().cuda();
      w = at::rand({T, K}, opt);
    }
    at::Tensor x = at::randn({T, 128}, opt);
    Dispatched d = cached ? g.dispatch(x, idx, w, Layout{}, &last->handle)
                          : g.dispatch(x, idx, w, g.get_dispatch_layout(idx, E));
    outs.push_back(g.combine(d.recv_x_NH * d.recv_topk_weights_NK.sum(1, true), d.handle));
    refs.push_back(x * w.sum(1, true));
    last = d;
  }
  for (size_t i = 0; i < outs.size(); ++i)
    EXPECT_LT(rel_err(outs[i], refs[i]), 1e-5)
        << "rank " << rank << " operation " << i << " mode " << mode_name(mode);
}

// One rank's checks; runs only in the re-executed workers.
TEST(CudaIpcWorker, DispatchCombine) {
  if (!std::getenv("MOERL_CUDA_IPC_WORKER")) GTEST_SKIP() << "runs as a rank of CudaIpc.*";
  const int rank = std::atoi(std::getenv("RANK"));
  if (std::string(std::getenv("MOERL_CUDA_IPC_WORKER")) == "spread") c10::cuda::set_device(static_cast<c10::DeviceIndex>(rank % c10::cuda::device_count()));
  if (std::string(std::getenv("MOERL_EP_TEST_BACKEND")) == "dp") return check_dense_gradients_on_the_device(rank);
  if (std::string(std::getenv("MOERL_EP_TEST_BACKEND")) == "cuda_ipc_silent_peer") return check_silent_peer_is_named(rank);
  const int64_t E = 16, K = 4, H = 264;  // H*2 bytes not a multiple of 16: byte path too
  for (Mode mode : {Mode::kNormal, Mode::kLowLatency}) {
    Config cfg;
    cfg.mode = mode;
    cfg.max_tokens_per_rank = 512;
    cfg.hidden = 512;
    cfg.max_topk = K;
    cfg.timeout_s = 60;
    const std::string backend = std::getenv("MOERL_EP_TEST_BACKEND") ? std::getenv("MOERL_EP_TEST_BACKEND") : "cuda_ipc";
    cfg.backend = parse_backend(backend);
    // What job::enable_gpu_paths registers (this binary does not link job/): cuda_ipc as
    // the hierarchical group's intra-node hop.
    if (cfg.backend == Backend::kHierarchical) detail::register_world_backend(Backend::kCudaIpc, &cuda_ipc_group_in);
    auto g = backend == "cuda_ipc" ? cuda_ipc_group(cfg, E) : make_group(cfg, E);
    const int64_t El = E / g->world_size();
    for (auto dt : {at::kBFloat16, at::kFloat}) {
      for (int64_t h : {H, int64_t{256}}) {
        at::manual_seed(100 + rank);
        const int64_t T = 100 + 37 * rank;
        auto opt = at::TensorOptions().device(at::kCUDA);
        at::Tensor x = at::randn({T, h}, opt.dtype(dt));
        at::Tensor idx = at::rand({T, E}).argsort(int64_t{1}, false).narrow(1, 0, K).contiguous();
        idx.masked_fill_(at::rand({T, K}).lt(0.1), -1);
        at::Tensor w = at::rand({T, K}).masked_fill(idx.lt(0), 0.f);
        at::Tensor idx_d = idx.cuda(), w_d = w.cuda();
        Layout l = g->get_dispatch_layout(idx_d, E);
        Dispatched d = g->dispatch(x, idx_d, w_d, l);
        ASSERT_EQ(d.recv_x_NH.size(0), d.handle.num_recv);
        at::Tensor ri = d.recv_topk_idx_NK.cpu();
        ASSERT_TRUE(ri.ge(-1).all().item<bool>() && ri.lt(El).all().item<bool>());
        int64_t per_expert_sum = 0;
        for (int64_t c : d.num_recv_tokens_per_expert) per_expert_sum += c;
        EXPECT_GE(per_expert_sum, mode == Mode::kLowLatency ? d.handle.num_recv : 0);
        // "Expert": scale each received row by the sum of its local weights.
        auto expert = [&](const Dispatched& dd) {
          at::Tensor s = dd.recv_topk_weights_NK.to(at::kCUDA, at::kFloat).sum(1, true);
          return (dd.recv_x_NH.to(at::kFloat) * s).to(dt);
        };
        at::Tensor out = g->combine(expert(d), d.handle);
        EXPECT_TRUE(d.recv_x_NH.is_cuda() && d.recv_topk_idx_NK.is_cuda() && out.is_cuda()) << backend;
        at::Tensor ref = x.to(at::kDouble).cpu() * w.sum(1, true).to(at::kDouble);
        const double tol = dt == at::kFloat ? 1e-5 : 2e-2;
        EXPECT_LT(rel_err(out, ref), tol) << "rank " << rank << " mode " << mode_name(mode);
        // Cached dispatch of new activations reuses the routing.
        at::Tensor x2 = at::randn({T, h}, opt.dtype(dt));
        Dispatched d2 = g->dispatch(x2, idx_d, w_d, l, &d.handle);
        at::Tensor out2 = g->combine(expert(d2), d2.handle);
        EXPECT_LT(rel_err(out2, x2.to(at::kDouble).cpu() * w.sum(1, true).to(at::kDouble)), tol);
        if (cfg.backend == Backend::kHierarchical) {  // tokens did cross between the 2 nodes
          EXPECT_EQ(hier::hier_topology(*g).num_nodes, 2);
          EXPECT_GT(hier::hier_stats(*g).inter_rows, 0);
        }
      }
    }
    check_back_to_back(*g, mode, rank, E, K);
  }
}

}  // namespace
}  // namespace moerl::ep
