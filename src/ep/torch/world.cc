// Process-wide TCPStore (created on first use) plus per-group PrefixStores.
#include "ep/torch/world.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "base/env.h"
#include "base/error.h"

namespace moerl::ep::detail {

World join_world(const std::string& group_kind, double timeout_s) {
  static c10::intrusive_ptr<c10d::Store> root;
  static env::Rendezvous rdv;
  static int num_groups = 0;
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  if (!root) {
    rdv = env::rendezvous();
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(rdv.master_port);
    o.isServer = rdv.rank == 0;
    o.numWorkers = rdv.world_size;
    o.waitWorkers = false;
    o.timeout = timeout;
    try {
      root = c10::make_intrusive<c10d::TCPStore>(rdv.master_addr, o);
    } catch (const std::exception& e) {
      throw Error("ep: rank " + std::to_string(rdv.rank) + " cannot reach the TCPStore at " + rdv.master_addr + ":" +
                      std::to_string(rdv.master_port) + ": " + e.what(),
                  "start all ranks with `moerl launch -n N`, or set MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK",
                  ErrorCode::kUnavailable);
    }
  }
  root->setTimeout(timeout);
  World w;
  w.rank = rdv.rank;
  w.world_size = rdv.world_size;
  w.store = c10::make_intrusive<c10d::PrefixStore>("ep" + std::to_string(num_groups++) + "/" + group_kind, root);
  return w;
}

World sub_world(const World& parent, const std::string& name, int rank, int world_size) {
  World w;
  w.rank = rank;
  w.world_size = world_size;
  w.store = c10::make_intrusive<c10d::PrefixStore>(name, parent.store);
  return w;
}

}  // namespace moerl::ep::detail
