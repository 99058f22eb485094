#include "support/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace dtc {
namespace {

// How long a thread spins for the next loop (or its stragglers) before it blocks: longer than
// the gaps between one step's kernels, short enough that an idle pool soon sleeps.
constexpr std::chrono::microseconds kSpin{200};

// Spins until done() or kSpin has passed; true if done.
template <typename Done>
bool spinUntil(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (done()) return true;
    if ((i & 63) == 63) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
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
  finishedChunks_.store(0);
  generation_.fetch_add(1);
  if (sleepers_ > 0) wake_.notify_all();
  // The caller works too, then waits for the stragglers.
  while (nextChunk_ < numChunks_) {
    int64_t c = nextChunk_++;
    lock.unlock();
    fn(c * chunk_, std::min(n, (c + 1) * chunk_));
    lock.lock();
    ++finishedChunks_;
  }
  const int64_t chunks = numChunks_;
  lock.unlock();
  spinUntil([&] { return finishedChunks_.load() == chunks; });
  lock.lock();
  done_.wait(lock, [this] { return finishedChunks_.load() == numChunks_; });
  job_ = nullptr;
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  while (true) {
    auto ready = [&] { return stop_.load() || generation_.load() != seen; };
    const bool woken = spinUntil(ready);
    std::unique_lock<std::mutex> lock(mutex_);
    if (!woken) {
      ++sleepers_;
      wake_.wait(lock, ready);
      --sleepers_;
    }
    if (stop_.load()) return;
    // The loop may be over already (the caller took every chunk): then this only catches up.
    seen = generation_.load();
    while (job_ != nullptr && nextChunk_ < numChunks_) {
      int64_t c = nextChunk_++;
      const auto* fn = job_;
      int64_t n = jobSize_, chunk = chunk_;
      lock.unlock();
      (*fn)(c * chunk, std::min(n, (c + 1) * chunk));
      lock.lock();
      if (finishedChunks_.fetch_add(1) + 1 == numChunks_) done_.notify_all();
    }
  }
}

}  // namespace dtc
