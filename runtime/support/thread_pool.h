// A fixed pool of worker threads for data-parallel loops inside one kernel.
#pragma once

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
  int64_t finishedChunks_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace dtc
