#include "sim/util/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace prefixsim {
namespace {

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// One ParallelFor call, on its caller's stack. Helpers join it under the pool's lock while it is
// listed; the caller unlists it when its items are all claimed and returns once the helpers that
// joined have left (`active` is the last thing a helper touches).
struct Job {
  size_t n = 0;
  const std::function<void(size_t)>* fn = nullptr;
  int max_helpers = 0;
  std::atomic<size_t> next{0};
  std::atomic<int> active{0};

  void RunItems() {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) (*fn)(i);
  }
};

class Pool {
 public:
  static Pool& Get() {
    static Pool* pool = new Pool;  // never destroyed: workers may still wait at exit
    return *pool;
  }

  void Run(Job& job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Grow(job.max_helpers);
      jobs_.push_back(&job);
      generation_.fetch_add(1, std::memory_order_release);
      if (sleepers_ > 0) wake_.notify_all();
    }
    job.RunItems();
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));
    }
    for (int spins = 0; spins < kSpins; ++spins) {
      if (job.active.load() == 0) return;
      CpuRelax();
    }
    // A helper still runs a long item (a whole replay): sleep until the last one leaves. The
    // counter and `active` are sequentially consistent, so either the helper sees the waiter or
    // the waiter sees the helper gone.
    std::unique_lock<std::mutex> lock(mu_);
    waiters_.fetch_add(1);
    left_.wait(lock, [&] { return job.active.load() == 0; });
    waiters_.fetch_sub(1);
  }

 private:
  // A fleet's phases come every few microseconds; a worker that slept between them would spend
  // more on waking than on the work, so it spins this long (a few tens of microseconds) first.
  static constexpr int kSpins = 4000;

  // REQUIRES: mu_ held.
  void Grow(int workers) {
    while (static_cast<int>(workers_started_) < workers) {
      std::thread([this] { WorkerLoop(); }).detach();
      ++workers_started_;
    }
  }

  // REQUIRES: mu_ held. The first listed job with items left and room for a helper.
  Job* Claim() {
    for (Job* job : jobs_) {
      if (job->next.load(std::memory_order_relaxed) < job->n &&
          job->active.load(std::memory_order_relaxed) < job->max_helpers) {
        job->active.fetch_add(1, std::memory_order_relaxed);
        return job;
      }
    }
    return nullptr;
  }

  void WorkerLoop() {
    uint64_t seen = 0;
    for (;;) {
      Job* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        job = Claim();
        if (job == nullptr) {
          seen = generation_.load(std::memory_order_acquire);
        }
      }
      if (job != nullptr) {
        job->RunItems();
        job->active.fetch_sub(1);  // the last touch of `job`: its caller may return now
        if (waiters_.load() > 0) {
          std::lock_guard<std::mutex> lock(mu_);
          left_.notify_all();
        }
        continue;
      }
      int spins = 0;
      while (spins < kSpins && generation_.load(std::memory_order_acquire) == seen) {
        CpuRelax();
        ++spins;
      }
      if (spins < kSpins) continue;
      std::unique_lock<std::mutex> lock(mu_);
      ++sleepers_;
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      --sleepers_;
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;         // a job was listed
  std::condition_variable left_;         // a helper left its job
  std::atomic<int> waiters_{0};          // callers asleep on left_
  std::vector<Job*> jobs_;               // guarded by mu_
  size_t workers_started_ = 0;           // guarded by mu_
  int sleepers_ = 0;                     // guarded by mu_
  std::atomic<uint64_t> generation_{0};  // bumped (under mu_) when a job is listed
};

int HardwareThreads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

void ParallelFor(size_t n, int jobs, const std::function<void(size_t)>& fn) {
  if (jobs <= 0) jobs = HardwareThreads();
  if (n <= 1 || jobs <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  Job job;
  job.n = n;
  job.fn = &fn;
  job.max_helpers = static_cast<int>(std::min<size_t>(static_cast<size_t>(jobs), n)) - 1;
  Pool::Get().Run(job);
}

}  // namespace prefixsim
