#include "sim/fleet/fleet.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/engine/metrics.h"
#include "sim/kv/routing.h"
#include "sim/util/parallel_for.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace fleet {

Fleet::Fleet(const KvPlan& plan, const EngineConfig& engine, const ReplayOptions& options,
             const ReplayTuning& tuning, bool report_fleet)
    : plan_(plan),
      engine_(engine),
      options_(options),
      tuning_(tuning),
      report_fleet_(report_fleet),
      records_(options.record_sink) {}

absl::StatusOr<std::unique_ptr<Fleet>> Fleet::Create(const KvPlan& plan, const ModelSpec& model,
                                                     const EngineConfig& engine,
                                                     const ReplayOptions& options,
                                                     const ReplayTuning& tuning, int replicas,
                                                     bool report_fleet) {
  if (replicas < 1 || replicas > kMaxReplicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas: ", replicas, " is not in [1, ", kMaxReplicas, "]"));
  }
  std::unique_ptr<Fleet> fleet(
      new Fleet(plan, engine, options, tuning, report_fleet || replicas > 1));
  RouterConfig config;
  config.num_replicas = replicas;
  config.seed = options.seed;
  config.overlap_weight = engine.fleet.overlap_weight;
  PREFIXSIM_ASSIGN_OR_RETURN(fleet->router_, NewRouter(engine.fleet.router, config));
  PREFIXSIM_RETURN_IF_ERROR(fleet->CreateViews(replicas));
  RequestLog* records = options.record_requests || options.record_sink ? &fleet->records_ : nullptr;
  fleet->sight_arrivals_ = options.attribute_misses && replicas > 1;
  // Each replica keeps its own record of what it computed: the bound is split evenly.
  ReplayOptions replica_options = options;
  if (options.miss_record_bytes > 0) {
    replica_options.miss_record_bytes = std::max<int64_t>(1, options.miss_record_bytes / replicas);
  }
  // Offload tiers the replicas share: one copy, made here.
  const kv::OffloadingConnector::SharedTiers shared_tiers =
      kv::OffloadingConnector::MakeSharedTiers(engine);
  for (int r = 0; r < replicas; ++r) {
    PREFIXSIM_ASSIGN_OR_RETURN(
        std::unique_ptr<Simulator> sim,
        Simulator::Create(plan, model, engine, replica_options, tuning, r, records, &shared_tiers));
    fleet->kv_caches_.push_back(&sim->kv());
    fleet->replicas_.push_back(std::move(sim));
  }
  fleet->tier_routing_ =
      fleet->routing_view_ != nullptr && engine.kv_offload.enabled() && plan.enable_prefix_caching;
  fleet->view_ = std::make_unique<FleetView>(&fleet->replicas_,
                                             fleet->tier_routing_ ? &fleet->routed_overlaps_
                                             : fleet->routing_view_ == fleet->exact_view_.get()
                                                 ? &fleet->exact_hits_
                                                 : &fleet->view_overlaps_);
  // The exact view's index is kept where it answers, and under ReplayOptions::check_invariants,
  // which compares it with the pools' own lookups.
  fleet->exact_from_pools_ =
      fleet->exact_view_ != nullptr && replicas <= tuning.fleet_exact_from_pools_max_replicas;
  fleet->keeps_exact_index_ =
      fleet->exact_view_ != nullptr && (!fleet->exact_from_pools_ || options.check_invariants);
  if (fleet->keeps_exact_index_ || fleet->router_view_reads_events_) {
    for (int r = 0; r < replicas; ++r) {
      fleet->feeds_.push_back(std::make_unique<ReplicaFeed>());
      kv::AttachCacheListener(*fleet->kv_caches_[r], fleet->feeds_.back().get());
    }
  }
  fleet->touched_.assign(replicas, 0);
  // A KV event sink that writes as it is called, or a tier the replicas share, gets its calls in
  // the order of a single-threaded run only on one thread.
  fleet->threads_ = options.threads;
  for (const auto& sim : fleet->replicas_) {
    if (!sim->SteppableOnAnyThread()) fleet->threads_ = 1;
  }
  return fleet;
}

absl::Status Fleet::CreateViews(int replicas) {
  const std::string_view router_default = router_->default_view();
  const std::string& asked = engine_.fleet.view.kind;
  if (!asked.empty() && router_default.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("router view '", asked, "': router ", std::string(router_->name()),
                     " does not read the caches (views apply to kv_aware and kv_aware_unaligned)"));
  }
  if (!asked.empty() && router_->name() == "kv_aware_unaligned" && asked != router_default) {
    return absl::InvalidArgumentError(
        absl::StrCat("router view '", asked,
                     "': kv_aware_unaligned is kv_aware on the attention_only view; use "
                     "`router=kv_aware` `router.view=",
                     asked, "`"));
  }
  const std::string effective_view = asked.empty() ? std::string(router_default) : asked;
  PREFIXSIM_RETURN_IF_ERROR(
      CheckViewKnobs(engine_.fleet.view, effective_view, std::string(router_->name())));
  if (replicas < 2) return absl::OkStatus();
  CacheViewConfig config;
  config.num_replicas = replicas;
  config.seed = options_.seed;
  config.plan = &plan_;
  config.one_walk = tuning_.fleet_one_walk;
  config.view.kind = "exact";
  PREFIXSIM_ASSIGN_OR_RETURN(exact_view_, NewCacheView(config));
  exact_index_ = &static_cast<IndexedView*>(exact_view_.get())->mutable_index();
  if (router_default.empty()) return absl::OkStatus();
  config.view = engine_.fleet.view;
  if (config.view.kind.empty()) config.view.kind = std::string(router_default);
  if (config.view.kind == "exact") {
    routing_view_ = exact_view_.get();
  } else {
    PREFIXSIM_ASSIGN_OR_RETURN(router_view_, NewCacheView(config));
    routing_view_ = router_view_.get();
    router_view_reads_events_ = router_view_->reads_events();
  }
  return absl::OkStatus();
}

void Fleet::ReplicaFeed::Drain(Fleet& fleet, int replica) {
  kv::FleetIndex& index = *fleet.exact_index_;
  const bool keep_index = fleet.keeps_exact_index_;
  CacheView* view = fleet.router_view_reads_events_ ? fleet.router_view_.get() : nullptr;
  // The events were buffered on the replica's thread; here each one's slot in the fleet's (large,
  // cold) table is fetched a few events ahead, then the row of replicas its slot names.
  constexpr size_t kAhead = 8;
  const size_t n = events_.size();
  for (size_t i = 0; i < std::min(kAhead, n); ++i) index.table().Prefetch(events_[i].key);
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) index.table().Prefetch(events_[i + kAhead].key);
    if (i + kAhead / 2 < n) index.PrefetchRow(events_[i + kAhead / 2].key);
    const Change& c = events_[i];
    if (c.removed) {
      if (keep_index) {
        const bool held = index.Remove(replica, c.key);
        PREFIXSIM_DCHECK(held);  // every remove follows its store
        static_cast<void>(held);
      }
      if (view != nullptr) view->OnRemoved(replica, c.key, c.group, c.now_ns);
    } else {
      if (keep_index) index.Store(replica, c.key, c.tag);
      if (view != nullptr) view->OnStored(replica, c.key, c.tag, c.group, c.now_ns);
    }
  }
  events_.clear();
}

int Fleet::RouteArrival(int64_t now, kv::ArrivalSighting* sighting) {
  const Request& request = *pending_;
  KvCacheManager& any = *kv_caches_[0];
  kv::HashPrompt(any, request, &route_hashes_);
  if (exact_from_pools_) {
    exact_hits_.resize(kv_caches_.size());
    for (size_t r = 0; r < kv_caches_.size(); ++r) {
      exact_hits_[r] = kv::PeekPromptHit(*kv_caches_[r], request, route_hashes_);
    }
  } else {
    exact_view_->Overlaps(any, request, route_hashes_, now, &exact_hits_);
  }
  if (options_.check_invariants) {
    // The fleet's index read for each replica gives the replica's own lookup.
    if (exact_from_pools_) exact_view_->Overlaps(any, request, route_hashes_, now, &index_hits_);
    for (size_t r = 0; r < kv_caches_.size(); ++r) {
      PREFIXSIM_CHECK((exact_from_pools_ ? index_hits_[r] : exact_hits_[r]) ==
                      kv::PeekPromptHit(*kv_caches_[r], request, route_hashes_));
      ++router_index_checks_;
    }
  }
  if (router_view_ != nullptr) {
    router_view_->Overlaps(any, request, route_hashes_, now, &view_overlaps_);
  }
  if (tier_routing_) AddTierOverlaps(request, now);
  const int r = router_->Route(request, *view_);
  PREFIXSIM_CHECK(r >= 0 && r < static_cast<int>(replicas_.size()));
  if (router_view_ != nullptr) router_view_->Routed(request, route_hashes_, r, now);
  const int64_t best = *std::max_element(exact_hits_.begin(), exact_hits_.end());
  sighting->routing_regret_tokens = best - exact_hits_[r];
  best_replica_hit_tokens_ += best;
  routing_regret_tokens_ += sighting->routing_regret_tokens;
  requests_with_regret_ += sighting->routing_regret_tokens > 0;
  return r;
}

// A token a replica holds only in a tier counts for part of one it holds on its GPU, as llm-d's
// tier-aware scorer weighs them: the router's overlap for each replica is its view's plus the
// weighted tokens its tiers would add (the connector's peek from that overlap on).
void Fleet::AddTierOverlaps(const Request& request, int64_t now) {
  const std::vector<int64_t>& base =
      routing_view_ == exact_view_.get() ? exact_hits_ : view_overlaps_;
  const RouterViewConfig& v = engine_.fleet.view;
  routed_overlaps_.assign(base.begin(), base.end());
  for (size_t r = 0; r < replicas_.size(); ++r) {
    int64_t split[kMaxOffloadTiers] = {};
    replicas_[r]->offload()->PeekSplit(route_hashes_, request.prompt_tokens, base[r], now, split);
    double weighted = v.cpu_tier_weight * static_cast<double>(split[0]);
    for (int t = 1; t < kMaxOffloadTiers; ++t) {
      weighted += v.storage_tier_weight * static_cast<double>(split[t]);
    }
    routed_overlaps_[r] += std::llround(weighted);
  }
}

absl::Status Fleet::ReadNext(TraceReader& trace) {
  auto req = std::make_unique<Request>();
  PREFIXSIM_ASSIGN_OR_RETURN(bool more, trace.Next(req.get()));
  if (!more) {
    pending_.reset();
    return absl::OkStatus();
  }
  // The event kernel never goes back in time: an arrival earlier than the previous one (or
  // before 0) is clamped and counted.
  if (req->arrival_ns < last_arrival_ns_) {
    req->arrival_ns = last_arrival_ns_;
    out_of_order_arrivals_ += 1;
  }
  last_arrival_ns_ = req->arrival_ns;
  pending_ = std::move(req);
  return absl::OkStatus();
}

absl::StatusOr<ReplayResult> Fleet::Run(TraceReader& trace) {
  wall_start_ = std::chrono::steady_clock::now();
  next_progress_ = options_.progress_interval_requests;
  PREFIXSIM_RETURN_IF_ERROR(ReadNext(trace));
  if (pending_) events_.Push(pending_->arrival_ns, Event{Event::kArrival, -1});
  while (!events_.empty() || !runs_.empty()) {
    if (Interrupted()) {
      for (auto& r : replicas_) r->Interrupt();
      break;
    }
    if (events_.empty()) {
      PREFIXSIM_RETURN_IF_ERROR(RunReplicas());
      continue;
    }
    const auto ev = events_.Pop();
    switch (ev.payload.kind) {
      case Event::kArrival:
        PREFIXSIM_RETURN_IF_ERROR(RunReplicas());
        PREFIXSIM_RETURN_IF_ERROR(HandleArrivals(trace));
        break;
      case Event::kStepDone:
        QueueRun(ev.payload.replica, events_.now(), /*finish_first=*/true);
        break;
    }
    if (!tuning_.replica_run_ahead) PREFIXSIM_RETURN_IF_ERROR(RunReplicas());
  }
  for (const auto& r : replicas_) PREFIXSIM_CHECK(r->idle());
  ReportProgress(true, /*done=*/true);
  ReplayResult result = Collect();
  result.trace_has_prefix_identity = trace.has_prefix_identity();
  return result;
}

absl::Status Fleet::HandleArrivals(TraceReader& trace) {
  const int64_t now = events_.now();
  // All requests that arrive at this instant are routed and join their replica's waiting queue
  // before any replica looks.
  while (pending_ && pending_->arrival_ns <= now) {
    if (first_arrival_ns_ < 0) first_arrival_ns_ = pending_->arrival_ns;
    requests_read_ += 1;
    kv::ArrivalSighting sighting;
    const int r = replicas_.size() == 1 ? 0 : RouteArrival(now, &sighting);
    if (sight_arrivals_) {
      const int64_t regret = sighting.routing_regret_tokens;
      sighting = kv::SightAtArrival(kv_caches_, r, *pending_, &sighting_hashes_);
      sighting.routing_regret_tokens = regret;
      kv::SetRoutableHits(exact_hits_, r, &sighting);
    }
    replicas_[r]->Admit(std::move(pending_), now, sighting);
    touched_[r] = 1;
    PREFIXSIM_RETURN_IF_ERROR(ReadNext(trace));
  }
  if (pending_) events_.Push(pending_->arrival_ns, Event{Event::kArrival, -1});
  ReportProgress(false);
  for (size_t r = 0; r < replicas_.size(); ++r) {
    if (!touched_[r]) continue;
    touched_[r] = 0;
    if (!replicas_[r]->busy()) {
      QueueRun(static_cast<int>(r), now, /*finish_first=*/false);
    }
  }
  return absl::OkStatus();
}

int Fleet::InterruptRaised() const {
  return options_.interrupt == nullptr ? 0 : options_.interrupt->load(std::memory_order_relaxed);
}

bool Fleet::Interrupted() {
  const int sig = InterruptRaised();
  if (sig != 0) interrupt_signal_ = sig;
  return sig != 0;
}

// A replica's steps touch nothing outside it, and nothing outside reads its state but the
// router, at arrivals. So between two arrivals every replica runs on its own: the steps that end
// before the next arrival run back to back, with the replica's state hot in the caches and
// without the event queue, and replicas run in parallel. What their steps leave for the fleet
// (cache events for the router's views, ended records) is kept per replica and applied here, on
// the fleet's thread, in the order the runs were queued:
// the order in which one thread would have run them, event by event. A step that ends at or
// after the next arrival goes back to the queue, which orders it against the arrival as before
// (same-time events in insertion order, and runs push in queue order). So the reports do not
// depend on the number of threads.
void Fleet::QueueRun(int replica, int64_t start_ns, bool finish_first) {
  ReplicaRun& run = runs_.emplace_back();
  run.replica = replica;
  run.start_ns = start_ns;
  run.finish_first = finish_first;
}

absl::Status Fleet::RunReplicas() {
  if (runs_.empty()) return absl::OkStatus();
  horizon_ns_ = pending_ ? pending_->arrival_ns : INT64_MAX;
  ParallelFor(runs_.size(), threads_, [this](size_t i) { Advance(runs_[i]); });
  for (const ReplicaRun& run : runs_) PREFIXSIM_RETURN_IF_ERROR(run.status);
  for (const ReplicaRun& run : runs_) {
    if (!feeds_.empty()) feeds_[run.replica]->Drain(*this, run.replica);
    replicas_[run.replica]->FlushEndedRecords();
    replicas_[run.replica]->DeliverEvents();
    // Only an interrupted run leaves a step ending before the next arrival, which the queue
    // may have passed; the replay stops at the next event anyway.
    if (run.step_end_ns >= 0) {
      events_.Push(std::max(run.step_end_ns, events_.now()), Event{Event::kStepDone, run.replica});
    }
    if ((total_steps_ >> 10) != ((total_steps_ + run.steps) >> 10)) ReportProgress(true);
    total_steps_ += run.steps;
  }
  runs_.clear();
  return absl::OkStatus();
}

void Fleet::Advance(ReplicaRun& run) const {
  Simulator& sim = *replicas_[run.replica];
  ReplicaFeed* feed = feeds_.empty() ? nullptr : feeds_[run.replica].get();
  int64_t now = run.start_ns;
  bool finish = run.finish_first;
  for (;;) {
    if (feed != nullptr) feed->clock_ns = now;
    if (finish) sim.FinishStep(now);
    absl::StatusOr<int64_t> dt = sim.StartStep(now);
    if (!dt.ok()) {
      run.status = dt.status();
      return;
    }
    if (*dt == 0) return;
    ++run.steps;
    now += *dt;
    if (now >= horizon_ns_ || !tuning_.replica_run_ahead || InterruptRaised()) {
      run.step_end_ns = now;
      return;
    }
    finish = true;
  }
}

void Fleet::ReportProgress(bool force, bool done) {
  if (!options_.progress) return;
  if (!force && requests_read_ < next_progress_) return;
  next_progress_ = requests_read_ + std::max<int64_t>(1, options_.progress_interval_requests);
  ReplayProgress p;
  p.requests_read = requests_read_;
  for (const auto& r : replicas_) p.requests_finished += r->requests_done();
  p.sim_time_ns = events_.now();
  p.done = done;
  options_.progress(p);
}

namespace {

// An engine that keeps up with its trace finishes soon after the last arrival: within the
// longest requests' own latency. One that falls behind drains a queue that grew over the whole
// trace. A minute of queue: an engine that keeps up drains its last requests in seconds (under 10 s
// on every fleet of docs/results.md that keeps up), and a median request that waits this long for
// its first token was queued, not computed. A share of the span instead (it was 10%) let a
// two-replica Mooncake fleet through: 196 s of drain, median TTFT 116 s, hit rate 0.09%.
constexpr int64_t kOverloadNs = 60'000'000'000;

bool IsOverloaded(int64_t trace_span_ns, int64_t sim_time_ns, double ttft_p50_ms) {
  return sim_time_ns - trace_span_ns > kOverloadNs || ttft_p50_ms * 1e6 > kOverloadNs;
}

}  // namespace

ReplayResult Fleet::Collect() {
  ReplayResult r;
  r.policy = plan_.policy;
  r.plan = plan_;
  LatencySketch ttft, tpot, e2e;
  double usage_sum = 0;
  int64_t window_queries = 0, window_hits = 0, last_finish_ns = 0;
  FleetSummary summary;
  summary.replicas = static_cast<int>(replicas_.size());
  summary.router = std::string(router_->name());
  for (auto& replica : replicas_) {
    ReplicaTotals t = replica->TakeTotals();
    const ReplayResult& c = t.counters;
    r.MergeCounters(c);
    usage_sum += t.usage_sum;
    window_queries += t.window_queries;
    window_hits += t.window_hits;
    last_finish_ns = std::max(last_finish_ns, t.last_finish_ns);
    ttft.Merge(t.ttft);
    tpot.Merge(t.tpot);
    e2e.Merge(t.e2e);

    ReplicaSummary rs;
    rs.requests = c.requests;
    rs.finished_requests = c.finished_requests;
    rs.prefix_cache = c.prefix_cache;
    rs.preemptions = c.preemptions;
    rs.evicted_blocks = c.evicted_blocks;
    rs.mean_kv_usage = c.num_steps > 0 ? t.usage_sum / static_cast<double>(c.num_steps) : 0.0;
    summary.per_replica.push_back(rs);
  }
  PREFIXSIM_CHECK(r.requests == requests_read_);
  r.out_of_order_arrivals = out_of_order_arrivals_;
  r.partial = interrupt_signal_ != 0;
  r.interrupt_signal = interrupt_signal_;
  r.recent_hit_rate = window_queries > 0
                          ? static_cast<double>(window_hits) / static_cast<double>(window_queries)
                          : 0.0;
  r.recent_window_requests = options_.hit_rate_window_requests;
  r.mean_kv_usage = r.num_steps > 0 ? usage_sum / static_cast<double>(r.num_steps) : 0.0;
  r.ttft = ttft.Summary();
  r.tpot = tpot.Summary();
  r.e2e = e2e.Summary();
  r.sim_time_ns =
      first_arrival_ns_ >= 0 ? std::max<int64_t>(last_finish_ns - first_arrival_ns_, 0) : 0;
  r.trace_span_ns = first_arrival_ns_ >= 0 ? last_arrival_ns_ - first_arrival_ns_ : 0;
  r.overloaded = !r.partial && IsOverloaded(r.trace_span_ns, r.sim_time_ns, r.ttft.p50_ms);
  if (r.sim_time_ns > 0) {
    const double s = static_cast<double>(r.sim_time_ns) / 1e9;
    r.requests_per_s = static_cast<double>(r.finished_requests) / s;
    r.prompt_tokens_per_s = static_cast<double>(r.prompt_tokens) / s;
    r.output_tokens_per_s = static_cast<double>(r.output_tokens) / s;
  }
  if (options_.record_requests && !options_.record_sink) r.per_request = records_.TakeAll();
  if (report_fleet_) {
    if (router_->uses_overlap_weight()) summary.overlap_weight = engine_.fleet.overlap_weight;
    int64_t max_requests = 0;
    for (const ReplicaSummary& rs : summary.per_replica) {
      max_requests = std::max(max_requests, rs.requests);
    }
    const double mean =
        static_cast<double>(r.requests) / static_cast<double>(summary.per_replica.size());
    summary.imbalance = mean > 0 ? static_cast<double>(max_requests) / mean : 0.0;
    summary.ttft_slo_ms = engine_.fleet.ttft_slo_ms;
    summary.trace_span_ns = r.trace_span_ns;
    if (routing_view_ != nullptr) summary.router_view = std::string(routing_view_->name());
    summary.router_index_checks = router_index_checks_;
    summary.routing_regret_tokens = routing_regret_tokens_;
    summary.best_replica_hit_tokens = best_replica_hit_tokens_;
    summary.requests_with_regret = requests_with_regret_;
    summary.router_fallback_requests = router_->fallback_requests();
    if (summary.router_fallback_requests > 0) summary.router_fallback = router_->fallback();
    r.fleet = std::move(summary);
  }
  r.wall_time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  return r;
}

}  // namespace fleet

}  // namespace prefixsim
