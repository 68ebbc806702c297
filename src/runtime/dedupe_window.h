// DedupeWindow: the trainer's record of which experience records it has taken, bounded by
// the tasks still in flight. Every key ("task_id#attempt") is held with its task's data
// cursor; once the controller knows every task below a cursor W is settled for good (trained
// once, dropped, dead-lettered or given up), settle_below(W) forgets their keys, and any
// record of a task below W that arrives later is a duplicate by that fact alone. So memory
// grows with the out-of-order span of the run (tasks created but not settled), not with its
// length, and no record is ever trained twice.
//
//   DedupeWindow w;
//   if (w.admit(dedupe_key(r.task_id, r.attempt), r.cursor)) train(r);  // else: a duplicate
//   w.settle_below(7);   // tasks 0..6 are done: their keys go, their late copies are dropped
// Not thread-safe: the buffer that owns it guards it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace moerl::runtime {

class DedupeWindow {
 public:
  // True the first time `key` of the task at `cursor` is offered, false for a key already
  // taken or reserved and for any task below the settled watermark.
  bool admit(const std::string& key, uint64_t cursor);
  // Marks `key` taken without handing anything out (a quarantined attempt whose late copies
  // must not train). A task below the watermark needs nothing.
  void reserve(const std::string& key, uint64_t cursor);
  // True when a record with this key and cursor would be refused by admit().
  bool taken(const std::string& key, uint64_t cursor) const;
  // Raises the watermark to `cursor` (never lowers it) and forgets the keys below it.
  void settle_below(uint64_t cursor);
  uint64_t settled_below() const { return settled_below_; }
  // Keys above the watermark, each with its task's data cursor (for snapshots).
  const std::map<std::string, uint64_t>& keys() const { return keys_; }
  size_t size() const { return keys_.size(); }
  void restore(std::map<std::string, uint64_t> keys, uint64_t settled_below);

 private:
  std::map<std::string, uint64_t> keys_;
  uint64_t settled_below_ = 0;
};

}  // namespace moerl::runtime
