// Per-request records in trace order (the per-request CSV, docs/design.md §4.5). Either kept whole
// (ReplayResult::per_request) or streamed: each record goes to a sink as soon as it and every
// earlier one are final, so memory holds only the records of requests still in flight (and the
// ones that finished after an earlier one still running), not the whole trace.
#ifndef PREFIXSIM_SIM_ENGINE_REQUEST_LOG_H_
#define PREFIXSIM_SIM_ENGINE_REQUEST_LOG_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "prefixsim/engine.h"
#include "sim/util/status_macros.h"

namespace prefixsim {

class RequestLog {
 public:
  using Sink = std::function<void(const RequestRecord&)>;
  // `sink` empty: keep every record (TakeAll).
  explicit RequestLog(Sink sink = {}) : sink_(std::move(sink)) {}

  // Appends the record of the next request in trace order; returns its index.
  int64_t Add(RequestRecord record) {
    records_.push_back(std::move(record));
    final_.push_back(0);
    return base_ + static_cast<int64_t>(records_.size()) - 1;
  }
  // REQUIRES: `index` was added and not streamed yet (not Final).
  RequestRecord& at(int64_t index) {
    PREFIXSIM_DCHECK(index >= base_ && index - base_ < static_cast<int64_t>(records_.size()));
    return records_[static_cast<size_t>(index - base_)];
  }
  // The record will not change again.
  void Final(int64_t index) {
    final_[static_cast<size_t>(index - base_)] = 1;
    if (!sink_) return;
    while (!records_.empty() && final_.front()) {
      sink_(records_.front());
      records_.pop_front();
      final_.pop_front();
      ++base_;
    }
  }
  // Every record, in trace order (keeping mode).
  std::vector<RequestRecord> TakeAll() {
    PREFIXSIM_CHECK(!sink_);
    std::vector<RequestRecord> out(std::make_move_iterator(records_.begin()),
                                   std::make_move_iterator(records_.end()));
    records_.clear();
    final_.clear();
    return out;
  }

 private:
  Sink sink_;
  std::deque<RequestRecord> records_;
  std::deque<char> final_;
  int64_t base_ = 0;  // index of records_.front()
};

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_ENGINE_REQUEST_LOG_H_
