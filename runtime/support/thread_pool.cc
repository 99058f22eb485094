#include "support/thread_pool.h"

#include <algorithm>

namespace dtc {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t maxChunks = std::min<int64_t>(size(), (n + grain - 1) / grain);
  if (maxChunks <= 1) {
    fn(0, n);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &fn;
  jobSize_ = n;
  chunk_ = (n + maxChunks - 1) / maxChunks;
  numChunks_ = (n + chunk_ - 1) / chunk_;
  nextChunk_ = 0;
  finishedChunks_ = 0;
  ++generation_;
  wake_.notify_all();
  // The caller works too, then waits for the stragglers.
  while (nextChunk_ < numChunks_) {
    int64_t c = nextChunk_++;
    lock.unlock();
    fn(c * chunk_, std::min(n, (c + 1) * chunk_));
    lock.lock();
    ++finishedChunks_;
  }
  done_.wait(lock, [this] { return finishedChunks_ == numChunks_; });
  job_ = nullptr;
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ != nullptr); });
    if (stop_) return;
    seen = generation_;
    while (job_ != nullptr && nextChunk_ < numChunks_) {
      int64_t c = nextChunk_++;
      const auto* fn = job_;
      int64_t n = jobSize_, chunk = chunk_;
      lock.unlock();
      (*fn)(c * chunk, std::min(n, (c + 1) * chunk));
      lock.lock();
      if (++finishedChunks_ == numChunks_) done_.notify_all();
    }
  }
}

}  // namespace dtc
