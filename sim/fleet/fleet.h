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
#include "sim/engine/replay_tuning.h"
#include "sim/engine/simulator.h"
#include "sim/fleet/cache_view.h"
#include "sim/fleet/event_queue.h"
#include "sim/fleet/router.h"
#include "sim/kv/block_hasher.h"

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
  // A replica's cache events, stamped with the simulated time, kept for the fleet's views. The
  // replica's thread appends; the fleet's thread applies them after the run (Drain), in the
  // order one thread would have.
  // Each on its own cache lines: replicas on different threads append at once.
  class alignas(64) ReplicaFeed final : public CacheEventListener {
   public:
    void OnBlockStored(uint64_t key, uint32_t tag, int group) override {
      events_.push_back(Change{key, tag, group, false, clock_ns});
    }
    void OnBlockRemoved(uint64_t key, int group) override {
      events_.push_back(Change{key, 0, group, true, clock_ns});
    }
    void Drain(Fleet& fleet, int replica);

    int64_t clock_ns = 0;  // the simulated time of the replica's call in progress

   private:
    struct Change {
      uint64_t key;
      uint32_t tag;
      int group;
      bool removed;
      int64_t now_ns;
    };
    std::vector<Change> events_;
  };
  // One replica's run of steps between two arrivals: from `start_ns` (ending the step in flight
  // first when `finish_first`) up to the first step that ends at or after the next arrival.
  // Runs on any thread; touches nothing outside the replica but its own feed.
  struct alignas(64) ReplicaRun {  // its own cache line: runs are written from their threads
    int replica = 0;
    int64_t start_ns = 0;
    bool finish_first = false;
    int64_t steps = 0;
    int64_t step_end_ns = -1;  // the step in flight at the end (-1: the replica went idle)
    absl::Status status;
  };

  Fleet(const KvPlan& plan, const EngineConfig& engine, const ReplayOptions& options,
        const ReplayTuning& tuning, bool report_fleet);
  absl::Status CreateViews(int replicas);
  absl::Status ReadNext(TraceReader& trace);
  // The replica that serves the pending request arriving `now`, and the sighting at arrival
  // (miss attribution, routing regret).
  void AddTierOverlaps(const Request& request, int64_t now);
  int RouteArrival(int64_t now, kv::ArrivalSighting* sighting);
  absl::Status HandleArrivals(TraceReader& trace);
  // Runs every replica run queued since the last call, in parallel, then applies their effects
  // on the fleet in queue order (see fleet.cc).
  void QueueRun(int replica, int64_t start_ns, bool finish_first);
  absl::Status RunReplicas();
  void Advance(ReplicaRun& run) const;
  // ReplayOptions::interrupt's signal, 0 while none (any thread).
  int InterruptRaised() const;
  // Whether ReplayOptions::interrupt is raised (records its signal; the fleet's thread).
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
  // The exact view's hits come from the replicas' pools (ReplayTuning), and whether its index is
  // kept all the same (check_invariants compares the two).
  bool exact_from_pools_ = false;
  bool keeps_exact_index_ = false;
  std::unique_ptr<CacheView> router_view_;
  bool router_view_reads_events_ = false;
  CacheView* routing_view_ = nullptr;  // the view the router reads, or null
  std::vector<std::unique_ptr<ReplicaFeed>> feeds_;
  int threads_ = 1;
  std::vector<ReplicaRun> runs_;  // queued, not run yet
  int64_t horizon_ns_ = 0;        // the next arrival while runs_ run (INT64_MAX: none)
  std::vector<kv::HashPair> route_hashes_;
  std::vector<int64_t> exact_hits_, view_overlaps_, index_hits_;
  // With offload tiers behind a cache-reading router: the view's overlaps plus each replica's
  // tier tokens beyond them, weighted (RouterViewConfig::cpu_tier_weight, storage_tier_weight).
  bool tier_routing_ = false;
  std::vector<int64_t> routed_overlaps_;
  int64_t router_index_checks_ = 0;
  int64_t routing_regret_tokens_ = 0, best_replica_hit_tokens_ = 0, requests_with_regret_ = 0;
  // Miss attribution over the replicas: each arrival sights what the others computed and hold.
  bool sight_arrivals_ = false;
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
