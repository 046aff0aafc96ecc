// The event kernel: a priority queue of events ordered by (time, sequence). Simulated time is
// int64 nanoseconds (docs/design.md §5); events at the same time run in insertion order. The queue
// owns the clock: popping an event advances now(), and scheduling into the past is a broken
// invariant.
#ifndef PREFIXSIM_SIM_FLEET_EVENT_QUEUE_H_
#define PREFIXSIM_SIM_FLEET_EVENT_QUEUE_H_

#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

#include "sim/util/status_macros.h"

namespace prefixsim {

template <typename Payload>
class EventQueue {
 public:
  struct Event {
    int64_t time_ns;
    uint64_t seq;
    Payload payload;
  };

  // Schedules `payload` at `time_ns`. REQUIRES: time_ns >= now().
  void Push(int64_t time_ns, Payload payload) {
    PREFIXSIM_CHECK(time_ns >= now_ns_);
    heap_.push(Event{time_ns, next_seq_++, std::move(payload)});
  }

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  int64_t now() const { return now_ns_; }
  // Time of the next event. REQUIRES: !empty().
  int64_t next_time() const { return heap_.top().time_ns; }

  // Removes the earliest event and advances the clock to its time. REQUIRES: !empty().
  Event Pop() {
    PREFIXSIM_CHECK(!heap_.empty());
    Event e = heap_.top();
    heap_.pop();
    PREFIXSIM_CHECK(e.time_ns >= now_ns_);  // time never goes backwards
    now_ns_ = e.time_ns;
    return e;
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
  int64_t now_ns_ = 0;
};

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_FLEET_EVENT_QUEUE_H_
