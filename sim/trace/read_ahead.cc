#include "sim/trace/read_ahead.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

class ReadAheadReader : public TraceReader {
 public:
  ReadAheadReader(std::unique_ptr<TraceReader> inner, const ReadAheadOptions& options)
      : inner_(std::move(inner)),
        format_(inner_->format()),
        has_prefix_identity_(inner_->has_prefix_identity()),
        prepare_(options.prepare),
        batch_requests_(std::max<size_t>(1, options.batch_requests)),
        max_batches_(std::max<size_t>(1, options.max_batches)) {
    producer_ = std::thread([this] { Produce(); });
  }
  ~ReadAheadReader() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    space_.notify_all();
    producer_.join();
  }

  absl::StatusOr<bool> Next(Request* out) override {
    while (current_pos_ == current_.requests.size()) {
      if (current_.last) {
        if (!current_.status.ok()) return current_.status;
        return false;
      }
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [this] { return !queue_.empty(); });
      current_ = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      space_.notify_one();
      current_pos_ = 0;
      if (current_.last) stats_ = current_.stats;
    }
    *out = std::move(current_.requests[current_pos_++]);
    return true;
  }

  std::string_view format() const override { return format_; }
  bool has_prefix_identity() const override { return has_prefix_identity_; }
  const TraceReadStats& stats() const override { return stats_; }

 private:
  struct Batch {
    std::vector<Request> requests;
    bool last = false;     // the end or an error follows the requests
    absl::Status status;   // of the last batch: OK at the end, else the error
    TraceReadStats stats;  // of the last batch: the inner reader's
  };

  void Produce() {
    for (;;) {
      Batch batch;
      batch.requests.reserve(batch_requests_);
      while (batch.requests.size() < batch_requests_) {
        Request r;
        absl::StatusOr<bool> more = inner_->Next(&r);
        if (!more.ok() || !*more) {
          batch.last = true;
          batch.status = more.ok() ? absl::OkStatus() : more.status();
          batch.stats = inner_->stats();
          break;
        }
        if (prepare_) prepare_(&r);
        batch.requests.push_back(std::move(r));
      }
      std::unique_lock<std::mutex> lock(mu_);
      space_.wait(lock, [this] { return stop_ || queue_.size() < max_batches_; });
      if (stop_) return;
      const bool last = batch.last;
      queue_.push_back(std::move(batch));
      lock.unlock();
      ready_.notify_one();
      if (last) return;
    }
  }

  std::unique_ptr<TraceReader> inner_;  // the producer's only
  const std::string format_;
  const bool has_prefix_identity_;
  const std::function<void(Request*)> prepare_;  // the producer's only
  const size_t batch_requests_;
  const size_t max_batches_;

  std::mutex mu_;
  std::condition_variable ready_;  // a batch was queued
  std::condition_variable space_;  // a batch was taken, or stop
  std::deque<Batch> queue_;
  bool stop_ = false;

  // The consumer's
  Batch current_;
  size_t current_pos_ = 0;
  TraceReadStats stats_;

  std::thread producer_;  // last: starts once everything above exists
};

}  // namespace

std::unique_ptr<TraceReader> ReadAhead(std::unique_ptr<TraceReader> inner,
                                       const ReadAheadOptions& options) {
  PREFIXSIM_CHECK(inner != nullptr);
  return std::make_unique<ReadAheadReader>(std::move(inner), options);
}

}  // namespace prefixsim
