// One vLLM engine replica as a discrete-event component. The event loop that drives it (arrivals
// from the trace, step completions on one shared clock) lives in sim/fleet/fleet.h, which runs
// one or many replicas behind a router. Each step schedules a batch (sim/sched), lasts the cost
// model's step time, then applies its results: prefill progress, sampled tokens, verified drafts
// (docs/design.md §2).
#ifndef PREFIXSIM_SIM_ENGINE_SIMULATOR_H_
#define PREFIXSIM_SIM_ENGINE_SIMULATOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/engine.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/kv_event_sink.h"
#include "sim/cost/cost_model.h"
#include "sim/engine/metrics.h"
#include "sim/engine/replay_tuning.h"
#include "sim/engine/request_log.h"
#include "sim/kv/miss_attribution.h"
#include "sim/kv/offloading_connector.h"
#include "sim/sched/scheduler.h"
#include "sim/spec/acceptance_model.h"

namespace prefixsim {

// What a replica accumulates; the fleet merges these into the ReplayResult.
struct ReplicaTotals {
  ReplayResult counters;          // the counters of ReplayResult (no plan, latency or per_request)
  LatencySketch ttft, tpot, e2e;  // bounded memory, however long the trace
  double usage_sum = 0;           // KV usage summed over steps
  int64_t window_queries = 0, window_hits = 0;  // the logged hit rate's window
  int64_t last_finish_ns = 0;
};

class Simulator {
 public:
  // Builds replica `replica` of the engine: KV manager, scheduler, acceptance and cost models.
  // `records` (may be null) receives one RequestRecord per request this replica is given, shared
  // with the other replicas in arrival order; each is marked final when the request ends.
  // Errors for a bad acceptance or cost-model configuration.
  // `shared_tiers`: the offload tiers the fleet's replicas share (null: none).
  static absl::StatusOr<std::unique_ptr<Simulator>> Create(
      const KvPlan& plan, const ModelSpec& model, const EngineConfig& engine,
      const ReplayOptions& options, const ReplayTuning& tuning, int replica, RequestLog* records,
      const kv::OffloadingConnector::SharedTiers* shared_tiers = nullptr);

  // A request arrives at `now`: it joins the waiting queue, or is skipped and counted. `sighting`:
  // what the fleet's other replicas held then (miss attribution).
  void Admit(std::unique_ptr<Request> request, int64_t now,
             const kv::ArrivalSighting& sighting = {});
  // Starts the next step at `now`. Returns its duration (> 0), or 0 when there is nothing to
  // run. REQUIRES: !busy(). FailedPrecondition when the engine cannot make progress.
  absl::StatusOr<int64_t> StartStep(int64_t now);
  // Ends the running step at `now`. REQUIRES: busy().
  void FinishStep(int64_t now);
  // The records of the requests that steps ended are marked final here, not in the step: a
  // fleet steps its replicas on several threads between two arrivals, and the shared log
  // streams records from its own thread. Call after a run of steps, from the fleet's thread.
  void FlushEndedRecords();
  // Likewise the KV event sink's batches (KvEventSink::Deliver), when it has one.
  void DeliverEvents() {
    if (event_sink_ != nullptr) event_sink_->Deliver();
  }
  // Whether the replica may step on any thread: its KV event sink, if any, hands on what it
  // shares with others only at DeliverEvents (KvEventSink::DeliversInRunOrder).
  // An offload tier shared with other replicas is used in the order of a single-threaded run.
  bool SteppableOnAnyThread() const {
    return (event_sink_ == nullptr || event_sink_->DeliversInRunOrder()) &&
           (offload_ == nullptr || !offload_->shares_tiers());
  }

  bool busy() const { return busy_; }
  bool idle() const {
    return !busy_ && scheduler_->num_running() == 0 && scheduler_->num_waiting() == 0;
  }
  int replica() const { return replica_; }
  int64_t num_steps() const { return totals_.counters.num_steps; }
  int64_t requests_done() const;  // finished or skipped
  // Work a router sees (as NVIDIA Dynamo's KV router counts it): prompt tokens not yet computed
  // of waiting and prefilling requests, plus the context tokens of decoding requests.
  int64_t OutstandingTokens() const;
  KvCacheManager& kv() { return *kv_; }
  // The offload tiers' connector, or null without tiers.
  kv::OffloadingConnector* offload() { return offload_.get(); }

  // An interrupted replay stops here: every request still waiting or running ends unfinished
  // (counted in interrupted_requests, its record marked "interrupted"); the step in flight, if
  // any, is dropped. Afterwards the replica is idle.
  void Interrupt();

  // The replica's totals at the end. REQUIRES: idle(). Call once.
  ReplicaTotals TakeTotals();

 private:
  Simulator(const KvPlan& plan, const EngineConfig& engine, const ReplayOptions& options,
            int replica, RequestLog* records);

  void Skip(const Request& request, const char* reason);
  int SampleAccepted(SimRequest* req, int num_drafts);
  void Finish(SimRequest* req);
  // With nothing to run: the earliest end of a tier load still in flight, or -1.
  int64_t NextLoadEnd(int64_t now) const;

  KvPlan plan_;
  EngineConfig engine_;
  ReplayOptions options_;
  int replica_;
  RequestLog* records_;
  std::vector<int64_t> ended_records_;  // final since the last FlushEndedRecords
  SchedulerConfig sched_config_;
  std::unique_ptr<KvCacheManager> kv_;
  KvEventSink* event_sink_ = nullptr;                 // ReplayOptions::kv_event_sink's, not owned
  std::unique_ptr<kv::OffloadingConnector> offload_;  // null without offload tiers
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<AcceptanceModel> acceptance_;
  std::unique_ptr<CostModel> cost_;
  Mt19937_64 rng_;  // the stream of std::mt19937_64 (docs/design.md §5: the only random source)
  int num_spec_tokens_ = 0;

  bool busy_ = false;
  bool interrupted_ = false;
  std::vector<ScheduledSeq> batch_;
  std::vector<SeqWork> work_;
  std::vector<SimRequest*> done_;                  // requests finished by the current step
  std::vector<std::unique_ptr<SimRequest>> live_;  // indexed by slot
  std::vector<size_t> free_slots_;

  // The thrashing check (ReplayOptions::max_preemptions_without_finish): the scheduler's
  // preemption count and this replica's step count when a request last finished.
  bool ThrashLimitReached() const {
    const int64_t preemptions = scheduler_->counters().preemptions - preemptions_at_last_finish_;
    const int64_t steps = totals_.counters.num_steps - steps_at_last_finish_;
    return (options_.max_preemptions_without_finish > 0 &&
            preemptions >= options_.max_preemptions_without_finish) ||
           (max_steps_without_finish_ > 0 && steps >= max_steps_without_finish_);
  }
  absl::Status ThrashingError() const;
  int64_t preemptions_at_last_finish_ = 0;
  int64_t steps_at_last_finish_ = 0;
  int64_t max_steps_without_finish_ = 0;  // resolved from the options; 0 = no limit

  ReplicaTotals totals_;
  // Verification steps by accepted drafts (0..k); the per-position counts are derived from it in
  // TakeTotals (a per-position loop in every step is a data-dependent branch per sequence).
  std::vector<int64_t> steps_by_accepted_;
};

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_ENGINE_SIMULATOR_H_
