// Reports of a replay (docs/design.md §4.5): the readable terminal summary, the JSON summary, the
// per-request CSV, and the side-by-side comparison of several policies (text, JSON, HTML).
// prefixsim/report.h is the public face of these for embedders (public_report.cc).
#ifndef PREFIXSIM_SIM_REPORT_REPORT_H_
#define PREFIXSIM_SIM_REPORT_REPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "prefixsim/analyze.h"
#include "prefixsim/engine.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/report.h"

namespace prefixsim {

// Memory the plan wastes on padding: per block id, the padded bytes of real layers plus whole
// pages of virtual padding layers, averaged over groups (every group assumed to hold the same
// number of blocks).
struct PlanWaste {
  double padding_bytes_per_block = 0;
  double waste_fraction = 0;  // of bytes_per_block
};
PlanWaste ComputePlanWaste(const KvPlan& plan);

// The replay JSON summary (docs/design.md §4.5).
nlohmann::ordered_json ReplayResultToJson(const ReplayResult& result,
                                          const ReportOptions& options = {});
// "SIGINT", "SIGTERM", or "signal N": how reports name ReplayResult::interrupt_signal.
std::string SignalName(int signal);
// For an overloaded replay (ReplayResult::overloaded): what happened, in figures, and what to do
// ("" otherwise). One paragraph, no trailing newline; the text and HTML reports both show it.
std::string OverloadWarning(const ReplayResult& result);
// With fleets sized for an SLO (FleetSummary::auto_sized) in every result: "policy new meets the
// p99 TTFT SLO of 8000 ms with 11 replicas, old needs 14 (3 replicas saved)", the fewest first,
// or "policies old, new all meet ... with 4 replicas"; "" otherwise.
std::string ReplicasAtSloHeadline(const std::vector<ReplayResult>& results);

// WriteRequestsCsv (prefixsim/report.h) writes one row per request: id, arrival, prompt tokens,
// hit tokens, loss to alignment, TTFT, end-to-end, preemptions (docs/design.md §4.5), plus output
// tokens and why a request was skipped.
// The same, a row at a time (streamed as requests finish). A fleet adds the replica columns;
// offload tiers (their media, CPU first) add gpu_hit_tokens and one <medium>_hit_tokens each.
struct RequestCsvLayout {
  bool fleet = false;
  std::vector<std::string> offload_tiers;
  static RequestCsvLayout For(const EngineConfig& engine);
};
void WriteRequestsCsvHeader(const RequestCsvLayout& layout, std::ostream& out);
void WriteRequestCsvRow(const RequestRecord& record, const RequestCsvLayout& layout,
                        std::ostream& out);

// Comparison of several replays of one trace; deltas are against the first.
nlohmann::ordered_json ComparisonToJson(const std::vector<ReplayResult>& results,
                                        const ReportOptions& options = {});

// One replay of a capacity sweep (HtmlReportOptions::capacity_sweep): the whole trace under one
// policy with kv_cache_bytes overridden.
struct CapacitySweepPoint {
  std::string policy;
  int64_t kv_cache_bytes = 0;
  int64_t num_blocks = 0;
  double hit_rate = 0;
  int64_t lost_to_alignment_tokens = 0;
  int64_t queries = 0;
};

// `prefixsim parity`'s figures for the report page's parity section: the simulated and the
// measured hit rate (vLLM's counters), and how a recorded KV event log agrees with the simulated
// one (sim/events/parity.h, converted by sim/cli/parity_cmd.cc).
struct ParityFigures {
  int64_t simulated_queries = 0, simulated_hits = 0;
  bool has_measured = false;
  int64_t measured_queries = 0, measured_hits = 0;
  bool has_events = false;
  int64_t steps = 0, steps_agreeing = 0;  // summed over replicas
  int64_t first_divergent_step = -1, first_divergent_replica = -1, first_divergent_group = -1;
  struct Group {
    int64_t replica = 0, group = 0;
    int64_t stored_simulated = 0, stored_measured = 0, removed_simulated = 0, removed_measured = 0;
    int64_t stored_simulated_only = 0, stored_measured_only = 0, steps_agreeing = 0;
  };
  std::vector<Group> groups;
  // Per step index: the replicas that have that step, and those whose sets agree after it.
  std::vector<int64_t> replicas_at_step, agreeing_at_step;
  // What the event comparison cannot say (events::ComparabilityWarnings), one sentence each.
  std::vector<std::string> cannot_compare;
};

// `prefixsim tune`'s search (sim/grid/tune.h), as its page shows it: the counts, the ranked
// plans and the front of hit rate against memory waste.
struct TuneFigures {
  std::string objective;  // "hit" or "replicas"
  double ttft_slo_ms = 0;
  int64_t considered = 0, duplicates = 0, distinct = 0, replays = 0, trace_requests = 0;
  int64_t unreplayed_above_best = 0;
  std::vector<std::pair<std::string, int64_t>> pruned;  // reason, count
  struct Plan {
    std::string label;
    bool baseline = false, pareto = false, recommended = false;
    std::string groups;  // "mla 1536 x5, mamba 1536 x14, ..."
    int64_t scheduler_block_size = 0, hash_block_size = 0, hit_alignment = 0;
    double memory_waste = 0, bound_hit_rate = 0, hit_rate = 0;
    int64_t replayed_requests = 0;  // 0: ranked only
    int replicas = 0;               // 0: not sized
    double gpu_hours_per_million = 0;
    std::string vllm;  // its vLLM engine arguments, and what none can set
  };
  std::vector<Plan> plans;  // in the search's order
};

struct HtmlReportOptions {
  std::string title;
  std::string subtitle;  // model, engine, trace
  bool deltas = true;    // a column of deltas against the first result (compare)
  std::vector<CapacitySweepPoint> capacity_sweep;
  int64_t configured_kv_cache_bytes = 0;   // marked on the capacity chart; 0 = none
  const AnalyzeResult* analyze = nullptr;  // the alignment curve of the same trace, or null
  std::string analyze_error;               // why analyze is null, if it failed
  const ParityFigures* parity = nullptr;   // `prefixsim parity`: its section, or null
  const TuneFigures* tune = nullptr;       // `prefixsim tune`: its section first, or null
};

// The A/B report page (html_report.cc): summary, the KV plans side by side with the LCM
// arithmetic, hit rate over time, CDFs of per-request hit fraction, lost-to-alignment tokens,
// the block-size cliff (hit fraction by prompt length with each policy's A and S), TTFT and E2E,
// hit rate vs KV bytes, the alignment curve with each policy's A marked, and for a fleet
// (ReplayResult::fleet) its router, auto-sizing probes and per-replica table and charts, and with
// HtmlReportOptions::parity the comparison against a measured run.
// Self-contained: inline CSS and SVG plus a short inline script that only verifies the page.
std::string HtmlReport(const std::vector<ReplayResult>& results, const HtmlReportOptions& options);

// The capacity sweep's point of `result`, a whole-trace replay of its policy with
// kv_cache_bytes = `kv_cache_bytes`.
CapacitySweepPoint SweepPointOf(const ReplayResult& result, int64_t kv_cache_bytes);

// The replays a capacity sweep of `results` at `capacities` (bytes) needs: each result's policy at
// each distinct capacity, except the configured one when the engine is sized by bytes
// (`sized_by_bytes`: no num_gpu_blocks), whose points are the results themselves and are added to
// page->capacity_sweep here. Every front end that draws the page plans its sweep with this.
struct CapacitySweepJob {
  size_t result = 0;  // index into `results`
  int64_t bytes = 0;
};
std::vector<CapacitySweepJob> PlanCapacitySweep(const std::vector<ReplayResult>& results,
                                                const std::vector<int64_t>& capacities,
                                                bool sized_by_bytes, HtmlReportOptions* page);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_REPORT_REPORT_H_
