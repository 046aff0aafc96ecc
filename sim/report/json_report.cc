#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sim/plan/plan_format.h"
#include "sim/report/report.h"

namespace prefixsim {
namespace {

// The tiers' hits and traffic, and the same under the names of vLLM's counters.
nlohmann::ordered_json OffloadJson(const ReplayResult& r) {
  const OffloadStats& o = r.offload;
  nlohmann::ordered_json tiers = nlohmann::ordered_json::array();
  int64_t loaded_bytes = 0, stored_bytes = 0;
  for (const OffloadTierStats& t : o.tiers) {
    tiers.push_back({{"medium", t.medium},
                     {"capacity_bytes", t.capacity_bytes},
                     {"capacity_blocks", t.capacity_blocks},
                     {"hit_tokens", t.hit_tokens},
                     {"loaded_blocks", t.loaded_blocks},
                     {"loaded_bytes", t.loaded_bytes},
                     {"stored_blocks", t.stored_blocks},
                     {"stored_bytes", t.stored_bytes},
                     {"evicted_blocks", t.evicted_blocks},
                     {"never_loaded_blocks", t.never_loaded_blocks},
                     {"store_failures", t.store_failures},
                     {"peak_used_bytes", t.peak_used_bytes}});
    loaded_bytes += t.loaded_bytes;
    if (t.medium == "CPU") stored_bytes += t.stored_bytes;
  }
  const int64_t tier_hits = o.tier_hit_tokens();
  return {{"gpu_hit_tokens", o.gpu_hit_tokens},
          {"tier_hit_tokens", tier_hits},
          {"tiers", tiers},
          {"loads", o.loads},
          {"mean_load_wait_ms",
           o.loads > 0 ? static_cast<double>(o.load_wait_ns) / 1e6 / o.loads : 0.0},
          {"deferred_lookups", o.deferred_lookups},
          {"stores_skipped", o.stores_skipped},
          {"vllm_metrics",
           {{"vllm:external_prefix_cache_hits", tier_hits},
            {"vllm:kv_offload_load_bytes", loaded_bytes},
            {"vllm:kv_offload_store_bytes", stored_bytes},
            {"vllm:kv_offload_stores_skipped", o.stores_skipped}}}};
}

nlohmann::ordered_json LatencyJson(const LatencySummary& l) {
  return {{"count", l.count},   {"mean_ms", l.mean_ms}, {"p50_ms", l.p50_ms},
          {"p90_ms", l.p90_ms}, {"p99_ms", l.p99_ms},   {"max_ms", l.max_ms}};
}

nlohmann::ordered_json FleetJson(const FleetSummary& f) {
  nlohmann::ordered_json j;
  j["replicas"] = f.replicas;
  j["router"] = f.router;
  if (f.overlap_weight > 0) j["overlap_weight"] = f.overlap_weight;
  if (!f.router_view.empty()) j["router_view"] = f.router_view;
  j["imbalance"] = f.imbalance;
  j["routing_regret_tokens"] = f.routing_regret_tokens;
  j["best_replica_hit_tokens"] = f.best_replica_hit_tokens;
  j["requests_with_regret"] = f.requests_with_regret;
  if (f.router_fallback_requests > 0) {
    j["router_fallback_requests"] = f.router_fallback_requests;
    j["router_fallback"] = f.router_fallback;
  }
  j["trace_span_s"] = static_cast<double>(f.trace_span_ns) / 1e9;
  j["per_replica"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < f.per_replica.size(); ++i) {
    const ReplicaSummary& r = f.per_replica[i];
    j["per_replica"].push_back({{"replica", i},
                                {"requests", r.requests},
                                {"finished_requests", r.finished_requests},
                                {"queries", r.prefix_cache.queries},
                                {"hits", r.prefix_cache.hits},
                                {"hit_rate", r.prefix_cache.hit_rate()},
                                {"preemptions", r.preemptions},
                                {"evicted_blocks", r.evicted_blocks},
                                {"mean_kv_usage", r.mean_kv_usage}});
  }
  if (f.auto_sized) {
    nlohmann::ordered_json probes = nlohmann::ordered_json::array();
    for (const AutoSizeProbe& p : f.probes) {
      probes.push_back({{"replicas", p.replicas},
                        {"sim_time_s", static_cast<double>(p.sim_time_ns) / 1e9},
                        {"ttft_p99_ms", p.ttft_p99_ms},
                        {"keeps_up", p.keeps_up}});
      if (p.thrashed) probes.back()["thrashed"] = true;
      if (p.overloaded) probes.back()["overloaded"] = true;
    }
    j["auto"] = {{"ttft_slo_ms", f.ttft_slo_ms}, {"span_slack", 1.1}, {"probes", probes}};
  }
  if (f.router_index_checks > 0) j["router_index_checks"] = f.router_index_checks;
  return j;
}

nlohmann::ordered_json MissTotalsJson(const MissCauseStats::Totals& t, bool tiers) {
  nlohmann::ordered_json tokens, requests, evicted_by;
  for (int c = 0; c < kNumMissCauses; ++c) {
    const std::string name(MissCauseName(static_cast<MissCause>(c)));
    tokens[name] = t.tokens[c];
    requests[name] = t.requests[c];
  }
  for (int b = 0; b < kNumEvictionBreakers; ++b) {
    evicted_by[std::string(EvictionBreakerName(static_cast<EvictionBreaker>(b)))] =
        t.evicted_tokens_by[b];
  }
  nlohmann::ordered_json j = {{"admissions", t.admissions},
                              {"tokens", t.total_tokens()},
                              {"tokens_by_cause", tokens},
                              {"requests_by_cause", requests},
                              {"evicted_tokens_by_breaker", evicted_by}};
  if (tiers) {
    j["evicted_tokens_by_tier"] = {{"evicted_from_tier", t.tier_evicted_tokens},
                                   {"not_stored", t.tier_not_stored_tokens}};
  }
  return j;
}

// The per-request distribution over served requests (first admission); nearest-rank
// percentiles of the exact counts.
nlohmann::ordered_json LostToAlignmentJson(const ReplayResult& r) {
  int64_t n = 0, with_loss = 0, sum = 0, max = 0;
  for (const auto& [tokens, count] : r.lost_to_alignment_requests) {
    n += count;
    if (tokens > 0) with_loss += count;
    sum += tokens * count;
    max = std::max(max, tokens);
  }
  auto pct = [&](double q) -> int64_t {
    if (n == 0) return 0;
    const int64_t rank = std::max<int64_t>(
        1, static_cast<int64_t>(std::ceil(q * static_cast<double>(n))));  // 1-based
    int64_t seen = 0;
    for (const auto& [tokens, count] : r.lost_to_alignment_requests) {
      seen += count;
      if (seen >= rank) return tokens;
    }
    return max;
  };
  return {{"requests", n},
          {"requests_with_loss", with_loss},
          {"mean_tokens", n == 0 ? 0.0 : static_cast<double>(sum) / static_cast<double>(n)},
          {"p50_tokens", pct(0.5)},
          {"p90_tokens", pct(0.9)},
          {"p99_tokens", pct(0.99)},
          {"max_tokens", max}};
}

}  // namespace

PlanWaste ComputePlanWaste(const KvPlan& plan) {
  PlanWaste w;
  if (plan.groups.empty()) return w;
  double sum = 0;
  for (const KvGroup& g : plan.groups) {
    sum += static_cast<double>(g.padding_bytes) * g.num_layers +
           static_cast<double>(g.page_bytes) * g.num_padding_layers;
  }
  w.padding_bytes_per_block = sum / static_cast<double>(plan.groups.size());
  if (plan.bytes_per_block > 0) {
    w.waste_fraction = w.padding_bytes_per_block / static_cast<double>(plan.bytes_per_block);
  }
  return w;
}

nlohmann::ordered_json ReplayResultToJson(const ReplayResult& r, const ReportOptions& options) {
  const PrefixCacheStats& pc = r.prefix_cache;
  const double preempted_rate = pc.preempted_queries > 0
                                    ? static_cast<double>(pc.preempted_hits) / pc.preempted_queries
                                    : 0.0;
  nlohmann::ordered_json j;
  j["policy"] = r.policy;
  j["kv_plan"] = KvPlanToJson(r.plan);
  const PlanWaste waste = ComputePlanWaste(r.plan);
  j["memory_waste"] = {{"padding_bytes_per_block", waste.padding_bytes_per_block},
                       {"waste_fraction", waste.waste_fraction}};
  j["requests"] = r.requests;
  if (!r.trace_has_prefix_identity) {
    // Only for lengths-only traces, so that other reports stay as they were.
    j["trace_has_prefix_identity"] = false;
    j["trace_note"] = "the trace has no prefix identity: hit rates are 0 by construction";
  }
  if (r.partial) {
    // Only in interrupted runs, so that complete reports stay as they were.
    j["partial"] = true;
    j["interrupted_by"] = SignalName(r.interrupt_signal);
    j["interrupted_requests"] = r.interrupted_requests;
  }
  j["finished_requests"] = r.finished_requests;
  j["skipped_requests"] = {{"prompt_too_long", r.skipped_prompt_too_long},
                           {"does_not_fit", r.skipped_does_not_fit},
                           {"empty_prompt", r.skipped_empty_prompt}};
  j["out_of_order_arrivals"] = r.out_of_order_arrivals;
  j["prefix_cache"] = {{"requests", pc.requests},
                       {"queries", pc.queries},
                       {"hits", pc.hits},
                       {"hit_rate", pc.hit_rate()},
                       {"recent_hit_rate", r.recent_hit_rate},
                       {"recent_window_requests", r.recent_window_requests},
                       {"preempted_requests", pc.preempted_requests},
                       {"preempted_queries", pc.preempted_queries},
                       {"preempted_hits", pc.preempted_hits},
                       {"preempted_hit_rate", preempted_rate}};
  j["alignment_loss_tokens"] = r.alignment_loss_tokens;
  j["preempted_alignment_loss_tokens"] = r.preempted_alignment_loss_tokens;
  j["unpublished_alignment_tokens"] = r.unpublished_alignment_tokens;
  j["lost_to_alignment_tokens"] = r.lost_to_alignment_tokens;
  j["lost_to_alignment_fraction"] =
      pc.queries > 0 ? static_cast<double>(r.lost_to_alignment_tokens) / pc.queries : 0.0;
  j["lost_to_alignment_per_request"] = LostToAlignmentJson(r);
  if (r.miss_causes.enabled) {
    const bool tiers = r.miss_causes.tiers;
    j["miss_causes"] = {{"first_admissions", MissTotalsJson(r.miss_causes.first, tiers)},
                        {"preempted_admissions", MissTotalsJson(r.miss_causes.preempted, tiers)},
                        {"forgotten_computed_blocks", r.miss_causes.forgotten_blocks}};
    if (tiers) j["miss_causes"]["forgotten_tier_keys"] = r.miss_causes.forgotten_tier_keys;
  }
  if (r.offload.enabled) j["offload"] = OffloadJson(r);
  j["evicted_blocks"] = r.evicted_blocks;
  j["cached_blocks"] = r.cached_blocks;
  j["preemptions"] = r.preemptions;
  j["spec_decode"] = {{"num_drafts", r.spec_decode.num_drafts},
                      {"draft_tokens", r.spec_decode.draft_tokens},
                      {"accepted_tokens", r.spec_decode.accepted_tokens},
                      {"acceptance_rate", r.spec_decode.acceptance_rate()},
                      {"mean_acceptance_length", r.spec_decode.mean_acceptance_length()},
                      {"accepted_per_position", r.spec_decode.accepted_per_position}};
  j["latency"] = {
      {"ttft", LatencyJson(r.ttft)}, {"tpot", LatencyJson(r.tpot)}, {"e2e", LatencyJson(r.e2e)}};
  j["throughput"] = {{"requests_per_s", r.requests_per_s},
                     {"prompt_tokens_per_s", r.prompt_tokens_per_s},
                     {"output_tokens_per_s", r.output_tokens_per_s}};
  j["num_steps"] = r.num_steps;
  j["prompt_tokens"] = r.prompt_tokens;
  j["output_tokens"] = r.output_tokens;
  j["computed_tokens"] = r.computed_tokens;
  j["max_running"] = r.max_running;
  j["mean_kv_usage"] = r.mean_kv_usage;
  j["sim_time_s"] = static_cast<double>(r.sim_time_ns) / 1e9;
  j["trace_span_s"] = static_cast<double>(r.trace_span_ns) / 1e9;
  j["overloaded"] = r.overloaded;
  if (r.fleet) j["fleet"] = FleetJson(*r.fleet);
  if (options.include_wall_time) j["wall_time_s"] = r.wall_time_s;
  return j;
}

nlohmann::ordered_json ComparisonToJson(const std::vector<ReplayResult>& results,
                                        const ReportOptions& options) {
  nlohmann::ordered_json j;
  for (const ReplayResult& r : results) {
    if (r.partial) j["partial"] = true;
    if (r.overloaded) j["overloaded"] = true;  // some policy's engine fell behind its trace
  }
  if (!results.empty() && !results.front().trace_has_prefix_identity) {
    j["trace_has_prefix_identity"] = false;
  }
  if (const std::string headline = ReplicasAtSloHeadline(results); !headline.empty()) {
    j["replicas_at_slo"] = headline;
  }
  j["policies"] = nlohmann::ordered_json::array();
  for (const ReplayResult& r : results) j["policies"].push_back(ReplayResultToJson(r, options));
  j["deltas"] = nlohmann::ordered_json::array();
  if (results.empty()) return j;
  const ReplayResult& base = results.front();
  const PlanWaste base_waste = ComputePlanWaste(base.plan);
  for (size_t i = 1; i < results.size(); ++i) {
    const ReplayResult& r = results[i];
    const PlanWaste waste = ComputePlanWaste(r.plan);
    j["deltas"].push_back(
        {{"policy", r.policy},
         {"baseline", base.policy},
         {"hit_rate_pp", 100.0 * (r.prefix_cache.hit_rate() - base.prefix_cache.hit_rate())},
         {"hits", r.prefix_cache.hits - base.prefix_cache.hits},
         {"alignment_loss_tokens", r.alignment_loss_tokens - base.alignment_loss_tokens},
         {"unpublished_alignment_tokens",
          r.unpublished_alignment_tokens - base.unpublished_alignment_tokens},
         {"lost_to_alignment_tokens", r.lost_to_alignment_tokens - base.lost_to_alignment_tokens},
         {"padding_bytes_per_block",
          waste.padding_bytes_per_block - base_waste.padding_bytes_per_block},
         {"memory_waste_fraction", waste.waste_fraction - base_waste.waste_fraction},
         {"num_blocks", r.plan.num_blocks - base.plan.num_blocks},
         {"preemptions", r.preemptions - base.preemptions},
         {"evicted_blocks", r.evicted_blocks - base.evicted_blocks},
         {"ttft_mean_ms", r.ttft.mean_ms - base.ttft.mean_ms},
         {"ttft_p99_ms", r.ttft.p99_ms - base.ttft.p99_ms},
         {"tpot_mean_ms", r.tpot.mean_ms - base.tpot.mean_ms},
         {"e2e_mean_ms", r.e2e.mean_ms - base.e2e.mean_ms}});
    if (r.fleet && base.fleet) {
      j["deltas"].back()["replicas"] = r.fleet->replicas - base.fleet->replicas;
    }
    // The first admissions' tokens by miss cause, as the text and HTML compare them.
    if (r.miss_causes.enabled && base.miss_causes.enabled) {
      nlohmann::ordered_json causes;
      for (int c = 0; c < kNumMissCauses; ++c) {
        causes[std::string(MissCauseName(static_cast<MissCause>(c)))] =
            r.miss_causes.first.tokens[c] - base.miss_causes.first.tokens[c];
      }
      j["deltas"].back()["miss_tokens_by_cause"] = std::move(causes);
    }
  }
  return j;
}

}  // namespace prefixsim
