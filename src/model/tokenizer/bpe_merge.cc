#include "model/tokenizer/bpe_merge.h"

#include <algorithm>
#include <limits>

namespace moerl::model::hf {

namespace {

constexpr uint32_t kNoMerge = std::numeric_limits<uint32_t>::max();
constexpr size_t kLinearScanMax = 64;  // symbols; above this the heap wins

uint32_t rank_of(const MergeTable& merges, int32_t a, int32_t b) {
  const MergeRule* r = merges.find(a, b);
  return r ? r->rank : kNoMerge;
}

void merge_linear(std::vector<int32_t>& sym, const MergeTable& merges) {
  // rank[i]: rank of the pair (sym[i], sym[i+1]).
  uint32_t rank[kLinearScanMax];
  size_t n = sym.size();
  for (size_t i = 0; i + 1 < n; ++i) rank[i] = rank_of(merges, sym[i], sym[i + 1]);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (rank[i] < rank[best]) best = i;
    }
    if (rank[best] == kNoMerge) break;
    sym[best] = merges.find(sym[best], sym[best + 1])->new_id;
    for (size_t i = best + 1; i + 1 < n; ++i) {
      sym[i] = sym[i + 1];
      rank[i] = rank[i + 1];
    }
    --n;
    if (best > 0) rank[best - 1] = rank_of(merges, sym[best - 1], sym[best]);
    if (best + 1 < n) rank[best] = rank_of(merges, sym[best], sym[best + 1]);
  }
  sym.resize(n);
}

struct Entry {
  uint32_t rank;
  uint32_t pos;  // index of the pair's left symbol
  int32_t new_id;
  // Min-heap on (rank, pos) through std::push_heap's max-heap: invert the order.
  bool operator<(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

void merge_heap(std::vector<int32_t>& sym, const MergeTable& merges) {
  const size_t n = sym.size();
  thread_local std::vector<int32_t> prev, next;
  thread_local std::vector<Entry> heap;
  prev.resize(n);
  next.resize(n);
  heap.clear();
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
    if (i + 1 < n) {
      if (const MergeRule* r = merges.find(sym[i], sym[i + 1])) heap.push_back({r->rank, static_cast<uint32_t>(i), r->new_id});
    }
  }
  std::make_heap(heap.begin(), heap.end());
  constexpr int32_t kGone = -1;  // sym value of a symbol merged into its left neighbour
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Entry top = heap.back();
    heap.pop_back();
    const int32_t right = next[top.pos];
    if (sym[top.pos] == kGone || right < 0) continue;
    const MergeRule* r = merges.find(sym[top.pos], sym[right]);
    if (r == nullptr || r->new_id != top.new_id) continue;  // stale: the pair has changed
    sym[top.pos] = top.new_id;
    sym[right] = kGone;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = static_cast<int32_t>(top.pos);
    if (prev[top.pos] >= 0) {
      const auto p = static_cast<uint32_t>(prev[top.pos]);
      if (const MergeRule* m = merges.find(sym[p], sym[top.pos])) {
        heap.push_back({m->rank, p, m->new_id});
        std::push_heap(heap.begin(), heap.end());
      }
    }
    if (next[top.pos] >= 0) {
      if (const MergeRule* m = merges.find(sym[top.pos], sym[next[top.pos]])) {
        heap.push_back({m->rank, top.pos, m->new_id});
        std::push_heap(heap.begin(), heap.end());
      }
    }
  }
  sym.erase(std::remove(sym.begin(), sym.end(), kGone), sym.end());
}

}  // namespace

void MergeTable::insert(int32_t a, int32_t b, uint32_t rank, int32_t new_id) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = pack(a, b);
  for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == key) {
      s.rule = {rank, new_id};
      return;
    }
    if (s.key == kEmpty) {
      s = {key, {rank, new_id}};
      ++size_;
      return;
    }
  }
}

void MergeTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  const size_t cap = old.empty() ? 64 : old.size() * 2;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  shift_ = 64 - __builtin_ctzll(cap);
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    for (size_t i = slot_of(s.key);; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = s;
        break;
      }
    }
  }
}

void merge_word(std::vector<int32_t>& symbols, const MergeTable& merges) {
  if (symbols.size() < 2) return;
  if (symbols.size() <= kLinearScanMax) {
    merge_linear(symbols, merges);
  } else {
    merge_heap(symbols, merges);
  }
}

void merge_word_naive(std::vector<int32_t>& symbols, const MergeTable& merges) {
  for (;;) {
    size_t best = symbols.size();
    uint32_t best_rank = kNoMerge;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const uint32_t r = rank_of(merges, symbols[i], symbols[i + 1]);
      if (r < best_rank) {
        best_rank = r;
        best = i;
      }
    }
    if (best == symbols.size()) return;
    symbols[best] = merges.find(symbols[best], symbols[best + 1])->new_id;
    symbols.erase(symbols.begin() + static_cast<long>(best) + 1);
  }
}

}  // namespace moerl::model::hf
