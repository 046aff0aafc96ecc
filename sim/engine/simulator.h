// The engine: one vLLM engine as a discrete-event simulation. Events are request arrivals and
// step completions; each step schedules a batch (sim/sched), lasts the cost model's step time,
// then applies its results: prefill progress, sampled tokens, verified drafts (DESIGN §2).
#ifndef PREFIXSIM_SIM_ENGINE_SIMULATOR_H_
#define PREFIXSIM_SIM_ENGINE_SIMULATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/engine.h"
#include "prefixsim/kv_cache_manager.h"
#include "sim/cost/cost_model.h"
#include "sim/engine/event_queue.h"
#include "sim/sched/scheduler.h"
#include "sim/spec/acceptance_model.h"

namespace prefixsim {

class Simulator {
 public:
  // Builds the engine: KV manager, scheduler, acceptance and cost models. Errors for a bad
  // acceptance or cost-model configuration.
  static absl::StatusOr<std::unique_ptr<Simulator>> Create(const KvPlan& plan,
                                                           const ModelSpec& model,
                                                           const EngineConfig& engine,
                                                           const ReplayOptions& options,
                                                           double cost_active_params = 0);

  // Runs the trace to the end. Call once.
  absl::StatusOr<ReplayResult> Run(TraceReader& trace);

 private:
  enum class EventType { kArrival, kStepDone };

  Simulator(const KvPlan& plan, const EngineConfig& engine, const ReplayOptions& options);

  // Reads the next request of the trace into pending_ (or clears it at the end).
  absl::Status ReadNext(TraceReader& trace);
  absl::Status HandleArrivals(TraceReader& trace);
  void Admit(std::unique_ptr<Request> request);
  void Skip(const Request& request, const char* reason);
  absl::Status StartStep();
  void FinishStep();
  int SampleAccepted(SimRequest* req, int num_drafts);
  void Finish(SimRequest* req);
  void ReportProgress(bool force, bool done = false);
  ReplayResult Collect();

  KvPlan plan_;
  EngineConfig engine_;
  ReplayOptions options_;
  SchedulerConfig sched_config_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<AcceptanceModel> acceptance_;
  std::unique_ptr<CostModel> cost_;
  std::mt19937_64 rng_;
  EventQueue<EventType> events_;
  int num_spec_tokens_ = 0;

  std::unique_ptr<Request> pending_;  // the next request of the trace, not yet arrived
  int64_t last_arrival_ns_ = 0;
  bool busy_ = false;
  std::vector<ScheduledSeq> batch_;
  std::vector<SeqWork> work_;
  std::vector<SimRequest*> done_;                  // requests finished by the current step
  std::vector<std::unique_ptr<SimRequest>> live_;  // indexed by slot
  std::vector<size_t> free_slots_;

  // Metrics.
  ReplayResult result_;
  int64_t first_arrival_ns_ = -1;
  int64_t last_finish_ns_ = 0;
  std::vector<int64_t> ttft_ns_, tpot_ns_, e2e_ns_;
  double usage_sum_ = 0;
  int64_t next_progress_ = 0;
  std::chrono::steady_clock::time_point wall_start_;
};

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_ENGINE_SIMULATOR_H_
