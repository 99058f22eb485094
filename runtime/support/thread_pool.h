// A fixed pool of worker threads for data-parallel loops inside one kernel.
//
// A step runs kernels back to back, each a parallelFor of tens to hundreds of microseconds.
// Waking a sleeping thread costs about that much (a futex and an idle core's wake-up, far more
// under a hypervisor), so a worker that blocked between kernels would join each loop late or
// not at all. Workers, and a caller waiting for them, spin for a short while first (as OpenMP
// runtimes do) and only then block; the spin yields, so processes sharing cores still progress.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dtc {

class ThreadPool {
 public:
  // threads == 0 picks the hardware concurrency. threads == 1 runs everything inline.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n), each at least `grain` long
  // (except the last), on the pool and the calling thread; returns when all are done.
  void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void workerLoop();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t jobSize_ = 0;
  int64_t chunk_ = 0;
  int64_t nextChunk_ = 0;
  int64_t numChunks_ = 0;
  // Read without the lock while spinning; written under it.
  std::atomic<int64_t> finishedChunks_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  int sleepers_ = 0;  // workers blocked on wake_
};

}  // namespace dtc
