// model::ThreadStream on the GPU: a worker thread with a stream of its own reads its results
// while another thread's work still runs on the default stream (on the default stream itself
// the read would wait for all of it), and synchronize_stream waits for the thread's own work.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include <thread>

#include "model/thread_stream.h"

namespace moerl::model {
namespace {

// Queues about a hundred milliseconds of matrix products on this thread's current stream.
void queue_long_work(at::Tensor& c) {
  const auto bf16 = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  at::Tensor a = at::randn({8192, 8192}, bf16), b = at::randn({8192, 8192}, bf16);
  c = at::empty({8192, 8192}, bf16);
  c10::cuda::device_synchronize();
  for (int i = 0; i < 120; ++i) at::mm_out(c, a, b);
}

TEST(ThreadStreamGpu, AWorkersReadDoesNotWaitForAnotherThreadsQueuedWork) {
  // The read's kernels loaded first: with CUDA's lazy module loading, a kernel's first launch
  // loads its module, which waits for the device (run alone, this test otherwise fails).
  (void)at::ones({16}, at::TensorOptions().device(at::kCUDA)).sum().item<float>();
  at::Tensor c;
  queue_long_work(c);  // the "trainer": the default stream is busy for a while
  const c10::cuda::CUDAStream trainer = c10::cuda::getDefaultCUDAStream();
  ASSERT_FALSE(trainer.query()) << "the queued products finished too fast to test anything";
  bool own = false, trainer_busy_after_read = false;
  float read = 0;
  std::thread worker([&] {
    const ThreadStream s(at::Device(at::kCUDA));
    own = s.active() && c10::cuda::getCurrentCUDAStream() != c10::cuda::getDefaultCUDAStream();
    read = at::ones({16}, at::TensorOptions().device(at::kCUDA)).sum().item<float>();
    trainer_busy_after_read = !trainer.query();
  });
  worker.join();
  EXPECT_TRUE(own);
  EXPECT_EQ(read, 16.0f);
  EXPECT_TRUE(trainer_busy_after_read) << "the worker's read waited for the default stream's work";
  c10::cuda::device_synchronize();
}

TEST(ThreadStreamGpu, SynchronizeWaitsForTheThreadsOwnStream) {
  const ThreadStream s(at::Device(at::kCUDA));
  at::Tensor c;
  queue_long_work(c);  // on this thread's own stream now
  const c10::cuda::CUDAStream mine = c10::cuda::getCurrentCUDAStream();
  ASSERT_NE(mine, c10::cuda::getDefaultCUDAStream());
  ASSERT_FALSE(mine.query());
  synchronize_stream(at::Device(at::kCUDA));
  EXPECT_TRUE(mine.query());
}

TEST(ThreadStreamGpu, OnTheCpuNothingChanges) {
  const ThreadStream s(at::Device(at::kCPU));
  EXPECT_FALSE(s.active());
  synchronize_stream(at::Device(at::kCPU));  // a no-op, no CUDA call
}

}  // namespace
}  // namespace moerl::model
