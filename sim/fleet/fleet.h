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
#include "sim/fleet/cache_view.h"
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
  // A replica's cache events, stamped with the simulated time, to the fleet's views.
  class ReplicaFeed final : public CacheEventListener {
   public:
    ReplicaFeed(Fleet* fleet, int replica) : fleet_(fleet), replica_(replica) {}
    void OnBlockStored(uint64_t key, uint32_t tag, int group) override;
    void OnBlockRemoved(uint64_t key, int group) override;

   private:
    Fleet* fleet_;
    int replica_;
  };

  Fleet(const KvPlan& plan, const EngineConfig& engine, const ReplayOptions& options,
        const ReplayTuning& tuning, bool report_fleet);
  absl::Status CreateViews(int replicas);
  absl::Status ReadNext(TraceReader& trace);
  // The replica that serves the pending request arriving `now`, and the sighting at arrival
  // (miss attribution, routing regret).
  int RouteArrival(int64_t now, kv::ArrivalSighting* sighting);
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
  // More than one replica: the exact view (every replica's hit, for the routing regret and for
  // routers on it), and the router's own view when it reads another (else null).
  std::unique_ptr<CacheView> exact_view_;
  kv::FleetIndex* exact_index_ = nullptr;  // the exact view's, fed directly (no second dispatch)
  std::unique_ptr<CacheView> router_view_;
  bool router_view_reads_events_ = false;
  CacheView* routing_view_ = nullptr;  // the view the router reads, or null
  std::vector<std::unique_ptr<ReplicaFeed>> feeds_;
  int64_t event_clock_ns_ = 0;  // the simulated time of the replica's call in progress
  std::vector<kv::HashPair> route_hashes_;
  std::vector<int64_t> exact_hits_, view_overlaps_;
  int64_t router_index_checks_ = 0;
  int64_t routing_regret_tokens_ = 0, best_replica_hit_tokens_ = 0, requests_with_regret_ = 0;
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
