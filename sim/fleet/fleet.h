// The fleet: N engine replicas (sim/engine/simulator.h) behind a router, on one event kernel and
// one clock (docs/design.md §2 "Fleet"). Arrivals come from the trace at their own rate; the router
// picks a replica for each; every replica steps on its own. One replica is the plain engine:
// same events in the same order, byte-identical reports.
#ifndef PREFIXSIM_SIM_FLEET_FLEET_H_
#define PREFIXSIM_SIM_FLEET_FLEET_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/engine.h"
#include "sim/engine/event_queue.h"
#include "sim/engine/replay_tuning.h"
#include "sim/engine/simulator.h"
#include "sim/fleet/router.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/compute_history.h"

namespace prefixsim {
namespace fleet {

class Fleet {
 public:
  // `replicas` engines configured by `engine` behind engine.fleet.router. `report_fleet`: the
  // result carries a FleetSummary (always with more than one replica).
  static absl::StatusOr<std::unique_ptr<Fleet>> Create(const KvPlan& plan, const ModelSpec& model,
                                                       const EngineConfig& engine,
                                                       const ReplayOptions& options,
                                                       const ReplayTuning& tuning, int replicas,
                                                       bool report_fleet);

  // Runs the trace to the end. Call once.
  absl::StatusOr<ReplayResult> Run(TraceReader& trace);

 private:
  struct Event {
    enum Kind { kArrival, kStepDone } kind;
    int replica;
  };

  Fleet(const KvPlan& plan, const EngineConfig& engine, const ReplayOptions& options,
        const ReplayTuning& tuning, bool report_fleet);
  absl::Status ReadNext(TraceReader& trace);
  absl::Status HandleArrivals(TraceReader& trace);
  // Starts the idle `replica`'s next step now, and runs on the steps that end before the next
  // arrival (see fleet.cc).
  absl::Status StartStep(int replica);
  // Whether ReplayOptions::interrupt is raised (records its signal).
  bool Interrupted();
  void ReportProgress(bool force, bool done = false);
  ReplayResult Collect();

  KvPlan plan_;
  EngineConfig engine_;
  ReplayOptions options_;
  ReplayTuning tuning_;
  bool report_fleet_;
  std::vector<std::unique_ptr<Simulator>> replicas_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<FleetView> view_;
  // Miss attribution over the replicas (null for one replica or with attribution off).
  std::unique_ptr<kv::ComputeHistory> history_;
  std::vector<KvCacheManager*> kv_caches_;
  std::vector<kv::HashPair> sighting_hashes_;
  EventQueue<Event> events_;
  RequestLog records_;

  std::unique_ptr<Request> pending_;  // the next request of the trace, not yet arrived
  std::vector<char> touched_;         // replicas given a request at the current instant
  int64_t requests_read_ = 0;
  int interrupt_signal_ = 0;  // the signal that stopped the run (ReplayOptions::interrupt)
  int64_t out_of_order_arrivals_ = 0;
  int64_t first_arrival_ns_ = -1;
  int64_t last_arrival_ns_ = 0;
  int64_t total_steps_ = 0;
  int64_t next_progress_ = 0;
  std::chrono::steady_clock::time_point wall_start_;
};

}  // namespace fleet
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_FLEET_FLEET_H_
