// libfabric plumbing: getinfo/fabric/domain/cq/av/endpoint, address exchange, one buffer
// (registered when the provider needs FI_MR_LOCAL), tagged send/recv with per-operation
// contexts, and a completion loop bounded by a deadline.
#include "ep/transport/fabric.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

#include "base/deadline.h"
#include "base/error.h"
#include "base/log.h"
#include "ep/transport/shm_regions.h"

namespace moerl::ep {

constexpr char kShmDir[] = "/dev/shm";  // where the shm provider's regions live (shm_open)

struct FabricEndpoint::Op {
  fi_context2 ctx;  // first member: the provider may use it (FI_CONTEXT/FI_CONTEXT2 mode)
  int peer = 0;
  bool is_recv = false;
  bool done = false;
};

struct FabricEndpoint::Fi {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  fid_mr* mr = nullptr;
  void* mr_desc = nullptr;
  std::vector<fi_addr_t> addr;
};

namespace {

[[noreturn]] void fail(const FabricEndpoint::Options& o, const std::string& call, int ret) {
  throw Error("ep fabric rank " + std::to_string(o.rank) + ": " + call + " failed: " + fi_strerror(-ret) +
                  " (provider '" + o.provider + "')",
              "check `fi_info -p " + o.provider + " -t FI_EP_RDM`; for tcp set FI_TCP_IFACE=lo on one machine",
              ErrorCode::kIo);
}

std::string libfabric_provider(const std::string& name) {
  // The tcp core provider offers RDM endpoints through the rxm utility layer.
  if (name == "tcp") return "tcp;ofi_rxm";
  return name;
}

}  // namespace

FabricEndpoint::FabricEndpoint(const Options& opts, const AllGather& allgather)
    : opts_(opts), fi_(std::make_unique<Fi>()), recv_len_(opts.world_size, 0) {
  fi_info* hints = fi_allocinfo();
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_MSG;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->fabric_attr->prov_name = strdup(libfabric_provider(opts.provider).c_str());
  int ret = fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &fi_->info);
  fi_freeinfo(hints);
  if (ret) fail(opts_, "fi_getinfo (RDM, tagged)", ret);
  fi_info* info = fi_->info;
  provider_name_ = info->fabric_attr->prov_name;
  needs_local_mr_ = (info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  if (info->ep_attr->max_msg_size < opts.buffer_bytes / 2) {
    throw Error("ep fabric: provider " + provider_name_ + " max message " + std::to_string(info->ep_attr->max_msg_size) +
                    " bytes is below one EP region",
                "lower max_tokens_per_rank or hidden in the [ep] config");
  }
  if ((ret = fi_fabric(info->fabric_attr, &fi_->fabric, nullptr))) fail(opts_, "fi_fabric", ret);
  if ((ret = fi_domain(fi_->fabric, info, &fi_->domain, nullptr))) fail(opts_, "fi_domain", ret);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_NONE;
  cq_attr.size = 4 * static_cast<size_t>(opts.world_size) + 64;
  if ((ret = fi_cq_open(fi_->domain, &cq_attr, &fi_->cq, nullptr))) fail(opts_, "fi_cq_open", ret);
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  if ((ret = fi_av_open(fi_->domain, &av_attr, &fi_->av, nullptr))) fail(opts_, "fi_av_open", ret);
  if ((ret = fi_endpoint(fi_->domain, info, &fi_->ep, nullptr))) fail(opts_, "fi_endpoint", ret);
  if ((ret = fi_ep_bind(fi_->ep, &fi_->av->fid, 0))) fail(opts_, "fi_ep_bind(av)", ret);
  if ((ret = fi_ep_bind(fi_->ep, &fi_->cq->fid, FI_TRANSMIT | FI_RECV))) fail(opts_, "fi_ep_bind(cq)", ret);
  if (provider_name_ == "shm") {
    // The shm provider names an endpoint's region "<pid>:<n>:<n>" in /dev/shm by default. A
    // region that a killed process left there under a pid the kernel has since reused made
    // fi_enable fail with "Device or resource busy": a name of our own cannot collide.
    // A lock file beside it lets a later endpoint remove it if this process is killed.
    if (const int n = sweep_stale_regions(kShmDir)) {
      MOERL_LOG(WARN) << "ep fabric: removed " << n << " shm region(s) of killed processes from " << kShmDir;
    }
    std::ostringstream unique;
    unique << "moerl-" << ::getpid() << "-" << std::hex << std::random_device{}() << std::random_device{}();
    std::string region = unique.str();
    region_lock_ = std::make_unique<ShmRegionLock>(kShmDir, region);
    if ((ret = fi_setname(&fi_->ep->fid, region.data(), region.size() + 1))) fail(opts_, "fi_setname", ret);
  }
  if ((ret = fi_enable(fi_->ep))) fail(opts_, "fi_enable", ret);

  // NOTE: one allocation for the life of the endpoint; page-aligned for registration.
  if (posix_memalign(reinterpret_cast<void**>(&buffer_), 4096, opts.buffer_bytes) != 0) {
    throw Error("ep fabric: cannot allocate the " + std::to_string(opts.buffer_bytes) + "-byte EP buffer",
                "lower max_tokens_per_rank or hidden in the [ep] config", ErrorCode::kIo);
  }
  std::memset(buffer_, 0, opts.buffer_bytes);
  if (needs_local_mr_) {
    if ((ret = fi_mr_reg(fi_->domain, buffer_, opts.buffer_bytes, FI_SEND | FI_RECV, 0, 0, 0, &fi_->mr, nullptr)))
      fail(opts_, "fi_mr_reg", ret);
    if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
      if ((ret = fi_mr_bind(fi_->mr, &fi_->ep->fid, 0))) fail(opts_, "fi_mr_bind", ret);
      if ((ret = fi_mr_enable(fi_->mr))) fail(opts_, "fi_mr_enable", ret);
    }
    fi_->mr_desc = fi_mr_desc(fi_->mr);
  }

  char name[256];
  size_t len = sizeof(name);
  if ((ret = fi_getname(&fi_->ep->fid, name, &len))) fail(opts_, "fi_getname", ret);
  std::vector<std::string> names = allgather(std::string(name, len));
  fi_->addr.resize(opts.world_size);
  for (int r = 0; r < opts.world_size; ++r) {
    ret = fi_av_insert(fi_->av, names[r].data(), 1, &fi_->addr[r], 0, nullptr);
    if (ret != 1) fail(opts_, "fi_av_insert(rank " + std::to_string(r) + ")", ret < 0 ? ret : -FI_EINVAL);
  }
}

FabricEndpoint::~FabricEndpoint() {
  if (fi_->ep) fi_close(&fi_->ep->fid);
  if (fi_->mr) fi_close(&fi_->mr->fid);
  if (fi_->av) fi_close(&fi_->av->fid);
  if (fi_->cq) fi_close(&fi_->cq->fid);
  if (fi_->domain) fi_close(&fi_->domain->fid);
  if (fi_->fabric) fi_close(&fi_->fabric->fid);
  if (fi_->info) fi_freeinfo(fi_->info);
  std::free(buffer_);
}

void* FabricEndpoint::desc_for(const void* p) const {
  auto* b = static_cast<const uint8_t*>(p);
  if (b >= buffer_ && b < buffer_ + opts_.buffer_bytes) return fi_->mr_desc;
  if (needs_local_mr_) {
    throw Error("ep fabric: provider " + provider_name_ + " needs registered memory but a send came from user memory",
                "this is a bug in moerl: stage the data in the EP buffer", ErrorCode::kInternal);
  }
  return nullptr;
}

void FabricEndpoint::begin(const std::string& what) {
  what_ = what;
  deadline_at_ = now_seconds() + opts_.timeout_s;
}

void FabricEndpoint::post_timed_out(const char* verb, int peer) const {
  throw Error("ep fabric rank " + std::to_string(opts_.rank) + ": timed out after " + std::to_string(opts_.timeout_s) +
                  "s in " + what_ + " (provider " + provider_name_ + "): could not post the " + verb + " rank " +
                  std::to_string(peer) + " (queue stayed full; the peer is not taking messages)",
              "a peer is dead, hung or far slower than expected; check its log", ErrorCode::kTimeout);
}

void FabricEndpoint::post_recv(int peer, size_t offset, size_t bytes, uint64_t tag) {
  ops_.push_back(std::make_unique<Op>());
  Op* op = ops_.back().get();
  op->peer = peer;
  op->is_recv = true;
  for (;;) {
    ssize_t ret = fi_trecv(fi_->ep, buffer_ + offset, bytes, fi_->mr_desc, FI_ADDR_UNSPEC, tag, 0, &op->ctx);
    if (ret == 0) break;
    if (ret != -FI_EAGAIN) fail(opts_, "fi_trecv from rank " + std::to_string(peer), static_cast<int>(ret));
    if (now_seconds() > deadline_at_) post_timed_out("receive from", peer);
    progress();
  }
  ++num_pending_;
}

void FabricEndpoint::post_send(int peer, const void* a, size_t a_bytes, uint64_t tag, const void* b,
                               size_t b_bytes) {
  ops_.push_back(std::make_unique<Op>());
  Op* op = ops_.back().get();
  op->peer = peer;
  iovec iov[2] = {{const_cast<void*>(a), a_bytes}, {const_cast<void*>(b), b_bytes}};
  void* desc[2] = {desc_for(a), b ? desc_for(b) : nullptr};
  const size_t count = (b && b_bytes) ? 2 : 1;
  for (;;) {
    ssize_t ret = count == 1 ? fi_tsend(fi_->ep, a, a_bytes, desc[0], fi_->addr[peer], tag, &op->ctx)
                             : fi_tsendv(fi_->ep, iov, desc, count, fi_->addr[peer], tag, &op->ctx);
    if (ret == 0) break;
    if (ret != -FI_EAGAIN) fail(opts_, "fi_tsend to rank " + std::to_string(peer), static_cast<int>(ret));
    if (now_seconds() > deadline_at_) post_timed_out("send to", peer);
    progress();
  }
  ++num_pending_;
}

void FabricEndpoint::progress() {
  fi_cq_tagged_entry entries[32];
  ssize_t n = fi_cq_read(fi_->cq, entries, 32);
  if (n > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      auto* op = static_cast<Op*>(entries[i].op_context);
      op->done = true;
      if (op->is_recv) recv_len_[op->peer] = entries[i].len;
      --num_pending_;
    }
    return;
  }
  if (n == -FI_EAGAIN) return;
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    fi_cq_readerr(fi_->cq, &err, 0);
    auto* op = static_cast<Op*>(err.op_context);
    std::string peer = op ? std::to_string(op->peer) : std::string("?");
    throw Error("ep fabric rank " + std::to_string(opts_.rank) + ": " + (op && op->is_recv ? "receive from" : "send to") +
                    " rank " + peer + " failed: " + fi_strerror(err.err) + " / " +
                    fi_cq_strerror(fi_->cq, err.prov_errno, err.err_data, nullptr, 0),
                "the peer may have exited; check its log", ErrorCode::kUnavailable);
  }
  fail(opts_, "fi_cq_read", static_cast<int>(n));
}

void FabricEndpoint::wait_all() {
  auto describe = [&] {
    std::ostringstream os;
    os << "ep fabric rank " << opts_.rank << ": timed out after " << opts_.timeout_s << "s in " << what_
       << " (provider " << provider_name_ << "): still missing";
    for (const auto& op : ops_) {
      if (!op->done) os << (op->is_recv ? " [message from rank " : " [send completion to rank ") << op->peer << "]";
    }
    return os.str();
  };
  wait_until([&] { return num_pending_ == 0; }, Deadline::after_seconds(deadline_at_ - now_seconds()), describe,
             [&] { progress(); });
  ops_.clear();
}

size_t FabricEndpoint::received_bytes(int peer) const { return recv_len_[peer]; }

}  // namespace moerl::ep
