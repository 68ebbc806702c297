// parallel_for: the thread fan-out S3Store uses for multipart parts and ranged GETs.
// Internal to store/s3; not a general thread pool (threads are made per call).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace moerl::store::s3 {

// Runs fn(i) for every i in [0, n) on up to `concurrency` threads (this one included). The
// first failure stops handing out items and is rethrown once every thread has finished.
inline void parallel_for(uint64_t n, int concurrency, const std::function<void(uint64_t)>& fn) {
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex err_mu;
  std::exception_ptr first_error;  // guarded by err_mu
  auto worker = [&] {
    while (!failed.load()) {
      uint64_t i = next++;
      if (i >= n) return;
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (!first_error) first_error = std::current_exception();
        failed = true;
      }
    }
  };
  int threads = static_cast<int>(std::min<uint64_t>(n, static_cast<uint64_t>(concurrency)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace moerl::store::s3
