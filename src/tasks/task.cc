// Task helpers: answer extraction, stable hashing, held-out membership, seeded RNG and
// table-free index permutation.
#include "tasks/task.h"

#include "base/check.h"

namespace moerl::tasks {

namespace {

uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

const char* split_name(Split split) { return split == Split::kTrain ? "train" : "heldout"; }

std::vector<TaskItem> Task::items(Split split, uint64_t first, uint64_t count) const {
  std::vector<TaskItem> out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) out.push_back(item(split, first + i));
  return out;
}

std::string_view answer_text(std::string_view completion) {
  std::string_view s = completion.substr(0, completion.find('\n'));
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

uint64_t stable_hash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return mix64(h);
}

bool is_held_out(std::string_view prompt, double fraction) {
  // NOTE: a fixed salt keeps membership independent of the task seed, so every run with
  // the same task settings evaluates on problems no run ever trains on.
  constexpr uint64_t kBuckets = 1000000;
  uint64_t bucket = mix64(stable_hash(prompt) ^ 0x6865'6c64'6f75'74ULL) % kBuckets;
  return static_cast<double>(bucket) < fraction * static_cast<double>(kBuckets);
}

Rng::Rng(std::initializer_list<uint64_t> key) {
  for (uint64_t k : key) state_ = mix64(state_ ^ mix64(k));
}

uint64_t Rng::next() {
  state_ += 0x9e3779b97f4a7c15ULL;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rng::below(uint64_t n) {
  MOERL_CHECK_GT(n, 0u);
  return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
}

int64_t Rng::uniform(int64_t lo, int64_t hi) {
  MOERL_CHECK_LE(lo, hi);
  return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
}

uint64_t permute_index(uint64_t index, uint64_t n, uint64_t key) {
  MOERL_CHECK_LT(index, n);
  if (n <= 1) return index;
  int bits = 0;
  while ((uint64_t{1} << bits) < n) ++bits;
  int half = (bits + 1) / 2;
  uint64_t mask = (uint64_t{1} << half) - 1;
  uint64_t x = index;
  do {  // cycle walking: re-encrypt until the value falls inside [0, n)
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      uint64_t f = mix64(right ^ mix64(key + round)) & mask;
      uint64_t next_right = left ^ f;
      left = right;
      right = next_right;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

}  // namespace moerl::tasks
