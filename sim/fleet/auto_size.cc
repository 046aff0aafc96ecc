// Auto-sizing (FleetConfig::auto_replicas): the smallest fleet that keeps up with the trace, i.e.
// whose simulated span is at most kSpanSlack x the trace's arrival span and whose p99 TTFT is
// within the SLO. Found by doubling (1, 2, 4, ...) until a size keeps up, then bisection between
// the last size that did not and the first that did. Assumes keeping up is monotone in the fleet
// size, which holds for load-balancing routers and, in practice, for the cache-aware ones (a larger
// fleet never has less memory or compute); the probes are reported so a reader can check.
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "prefixsim/engine.h"
#include "sim/fleet/fleet.h"
#include "sim/fleet/replay.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

constexpr double kSpanSlack = 1.1;
constexpr int kMaxAutoReplicas = 1024;
// Doubling the fleet that keeps the span and improving p99 TTFT by less than 2%: a floor.
constexpr double kTtftFloorRatio = 0.98;

}  // namespace

absl::StatusOr<ReplayResult> ReplayWithFleetSizing(const KvPlan& plan, const ModelSpec& model,
                                                   const EngineConfig& engine,
                                                   const TraceOpener& open_trace,
                                                   const ReplayOptions& options,
                                                   const ReplayTuning& tuning) {
  PREFIXSIM_RETURN_IF_ERROR(CheckStartupMemory(plan));
  if (!engine.fleet.auto_replicas) {
    PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> trace, open_trace());
    return Replay(plan, model, engine, *trace, options, tuning);
  }
  std::vector<AutoSizeProbe> probes;
  // Probes keep no per-request records; the chosen size is replayed once more for them.
  const bool wants_records = options.record_requests || static_cast<bool>(options.record_sink);
  ReplayOptions probe_options = options;
  probe_options.record_requests = false;
  probe_options.record_sink = nullptr;
  auto replay = [&](int n, const ReplayOptions& o) -> absl::StatusOr<ReplayResult> {
    PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> trace, open_trace());
    PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<fleet::Fleet> f,
                               fleet::Fleet::Create(plan, model, engine, o, tuning, n, true));
    return f->Run(*trace);
  };
  int64_t trace_span_ns = 0;  // known from the first probe that ran to the end
  auto probe = [&](int n) -> absl::StatusOr<ReplayResult> {
    PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> trace, open_trace());
    PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<fleet::Fleet> f,
                               fleet::Fleet::Create(plan, model, engine, probe_options, tuning, n,
                                                    /*report_fleet=*/true));
    absl::StatusOr<ReplayResult> run = f->Run(*trace);
    if (absl::IsResourceExhausted(run.status())) {
      // Thrashing: this fleet is too small to keep up; the search goes on with a larger one.
      AutoSizeProbe p;
      p.replicas = n;
      p.thrashed = true;
      probes.push_back(p);
      ReplayResult stand_in;
      stand_in.fleet.emplace();
      stand_in.fleet->trace_span_ns = trace_span_ns;
      return stand_in;
    }
    PREFIXSIM_RETURN_IF_ERROR(run.status());
    ReplayResult result = *std::move(run);
    PREFIXSIM_CHECK(result.fleet.has_value());
    trace_span_ns = result.fleet->trace_span_ns;
    const int64_t span_ns = result.fleet->trace_span_ns;
    AutoSizeProbe p;
    p.replicas = n;
    p.sim_time_ns = result.sim_time_ns;
    p.ttft_p99_ms = result.ttft.p99_ms;
    p.overloaded = result.overloaded;
    // A trace whose requests all arrive at once has no span to keep up with: the SLO decides.
    const bool span_ok = span_ns == 0 || static_cast<double>(result.sim_time_ns) <=
                                             kSpanSlack * static_cast<double>(span_ns);
    // Nor is a fleet the report would call overloaded (a loose SLO alone could pass one).
    p.keeps_up = span_ok && !p.overloaded && result.ttft.p99_ms <= engine.fleet.ttft_slo_ms;
    probes.push_back(p);
    return result;
  };
  // An interrupted probe ends the search: its partial result is the answer, with the probes so
  // far (the last one partial).
  auto attach_probes = [&](ReplayResult* r) {
    r->fleet->auto_sized = true;
    r->fleet->probes = probes;
  };
  int lo = 0;  // the largest size known not to keep up (0: none tried)
  int hi = 1;
  PREFIXSIM_ASSIGN_OR_RETURN(ReplayResult best, probe(hi));
  if (best.partial) {
    attach_probes(&best);
    return best;
  }
  while (!probes.back().keeps_up) {
    // Once the fleet keeps the span, more replicas only shorten queues; if doubling no longer
    // moves p99 TTFT, it is the prefill time of the trace's long prompts on an idle engine and no
    // fleet meets the SLO: say so rather than doubling up to the cap.
    if (probes.size() >= 2) {
      const AutoSizeProbe& last = probes[probes.size() - 1];
      const AutoSizeProbe& prev = probes[probes.size() - 2];
      const double span = static_cast<double>(best.fleet->trace_span_ns);
      const bool spans_ok = !last.thrashed && !prev.thrashed &&
                            static_cast<double>(last.sim_time_ns) <= kSpanSlack * span &&
                            static_cast<double>(prev.sim_time_ns) <= kSpanSlack * span;
      if (spans_ok && last.ttft_p99_ms > kTtftFloorRatio * prev.ttft_p99_ms) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "`replicas=auto`: p99 TTFT stays at %.0f ms with %d replica%s and %.0f ms with %d, "
            "above the SLO of %.0f ms: it is the prefill time of the trace's longest prompts, "
            "which no fleet size shortens; raise `ttft_slo_ms` (or give `replicas=N`)",
            prev.ttft_p99_ms, prev.replicas, prev.replicas == 1 ? "" : "s", last.ttft_p99_ms,
            last.replicas, engine.fleet.ttft_slo_ms));
      }
    }
    if (hi >= kMaxAutoReplicas) {
      const AutoSizeProbe& last = probes.back();
      return absl::FailedPreconditionError(absl::StrFormat(
          "`replicas=auto`: no fleet of up to %d replicas keeps up with the trace (at %d: "
          "simulated %.1f s for a %.1f s trace, p99 TTFT %.0f ms, SLO %.0f ms)",
          kMaxAutoReplicas, last.replicas, static_cast<double>(last.sim_time_ns) / 1e9,
          static_cast<double>(best.fleet->trace_span_ns) / 1e9, last.ttft_p99_ms,
          engine.fleet.ttft_slo_ms));
    }
    lo = hi;
    hi *= 2;
    PREFIXSIM_ASSIGN_OR_RETURN(best, probe(hi));
    if (best.partial) {
      attach_probes(&best);
      return best;
    }
  }
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    PREFIXSIM_ASSIGN_OR_RETURN(ReplayResult result, probe(mid));
    if (result.partial) {
      attach_probes(&result);
      return result;
    }
    if (probes.back().keeps_up) {
      hi = mid;
      best = std::move(result);
    } else {
      lo = mid;
    }
  }
  if (wants_records) {
    // The same inputs and seed give the same run: only the records are new.
    PREFIXSIM_ASSIGN_OR_RETURN(ReplayResult again, replay(hi, options));
    if (again.partial) {
      attach_probes(&again);
      return again;
    }
    PREFIXSIM_CHECK(again.prefix_cache.hits == best.prefix_cache.hits &&
                    again.num_steps == best.num_steps);
    best = std::move(again);
  }
  FleetSummary& fs = *best.fleet;
  fs.auto_sized = true;
  fs.probes = std::move(probes);
  return best;
}

}  // namespace prefixsim
