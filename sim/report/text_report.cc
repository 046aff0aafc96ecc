#include <algorithm>
#include <csignal>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/report/report.h"

namespace prefixsim {
namespace {

double Pct(int64_t a, int64_t b) { return b > 0 ? 100.0 * static_cast<double>(a) / b : 0.0; }

// The hit split by tier (first admissions, as the hit rate counts them) and each tier's traffic.
std::string OffloadSection(const ReplayResult& r) {
  const OffloadStats& o = r.offload;
  const int64_t queries = r.prefix_cache.queries - r.prefix_cache.preempted_queries;
  std::string s = absl::StrFormat("  by tier: GPU %.2f%%", Pct(o.gpu_hit_tokens, queries));
  for (const OffloadTierStats& t : o.tiers) {
    absl::StrAppendFormat(&s, ", %s %.2f%%", t.medium, Pct(t.hit_tokens, queries));
  }
  absl::StrAppendFormat(&s, " of first admissions' tokens; %d loads, mean wait %.2f ms\n", o.loads,
                        o.loads > 0 ? static_cast<double>(o.load_wait_ns) / 1e6 / o.loads : 0.0);
  for (const OffloadTierStats& t : o.tiers) {
    absl::StrAppendFormat(
        &s,
        "  %s tier: %.1f GiB (%d blocks); stored %d blocks (%.1f GiB), loaded %d, evicted %d, "
        "never loaded %d, refused stores %d\n",
        t.medium, static_cast<double>(t.capacity_bytes) / (1LL << 30), t.capacity_blocks,
        t.stored_blocks, static_cast<double>(t.stored_bytes) / (1LL << 30), t.loaded_blocks,
        t.evicted_blocks, t.never_loaded_blocks, t.store_failures);
  }
  if (o.stores_skipped > 0) {
    absl::StrAppendFormat(&s, "  stores skipped below store_threshold: %d blocks\n",
                          o.stores_skipped);
  }
  return s;
}

std::string LatencyRow(const char* name, const LatencySummary& l) {
  return absl::StrFormat("  %-5s %10.1f %10.1f %10.1f %10.1f %10.1f\n", name, l.mean_ms, l.p50_ms,
                         l.p90_ms, l.p99_ms, l.max_ms);
}

// `policy` non-empty names the policy whose fleet this is (compare prints one per policy).
std::string FleetSection(const FleetSummary& f, const std::string& policy = "") {
  std::string s;
  absl::StrAppendFormat(&s, "Fleet%s: %d replica%s, router %s",
                        policy.empty() ? "" : absl::StrCat(" of policy ", policy), f.replicas,
                        f.replicas == 1 ? "" : "s", f.router);
  if (f.overlap_weight > 0) absl::StrAppendFormat(&s, " (overlap weight %g)", f.overlap_weight);
  if (!f.router_view.empty()) absl::StrAppendFormat(&s, " on the %s view", f.router_view);
  absl::StrAppendFormat(&s, ", load imbalance %.2f (max / mean requests)\n", f.imbalance);
  if (f.router_fallback_requests > 0) {
    absl::StrAppendFormat(&s, "  router %s: %d requests %s\n", f.router, f.router_fallback_requests,
                          f.router_fallback);
  }
  if (f.replicas > 1) {
    absl::StrAppendFormat(&s,
                          "  routing regret: %d tokens (%.2f%% of the best replicas' hits %d), "
                          "%d requests routed past a better hit\n",
                          f.routing_regret_tokens,
                          f.best_replica_hit_tokens > 0
                              ? 100.0 * static_cast<double>(f.routing_regret_tokens) /
                                    static_cast<double>(f.best_replica_hit_tokens)
                              : 0.0,
                          f.best_replica_hit_tokens, f.requests_with_regret);
  }
  if (f.auto_sized) {
    absl::StrAppendFormat(&s,
                          "  `replicas=auto`: smallest fleet not overloaded, with simulated span "
                          "<= 1.1 x trace span (%.1f s) and p99 TTFT <= %.0f ms; tried",
                          static_cast<double>(f.trace_span_ns) / 1e9, f.ttft_slo_ms);
    for (const AutoSizeProbe& p : f.probes) {
      absl::StrAppendFormat(&s, " %d%s", p.replicas,
                            p.keeps_up     ? "+"
                            : p.thrashed   ? "!"
                            : p.overloaded ? "~"
                                           : "-");
    }
    s += " (+ keeps up, ~ overloaded, ! thrashed, - too slow: span or p99 TTFT over the bound)\n";
  }
  absl::StrAppendFormat(&s, "  %7s %9s %9s %9s %11s %9s %8s\n", "replica", "requests", "finished",
                        "hit rate", "preemptions", "evicted", "KV use");
  for (size_t i = 0; i < f.per_replica.size(); ++i) {
    const ReplicaSummary& r = f.per_replica[i];
    absl::StrAppendFormat(&s, "  %7d %9d %9d %8.2f%% %11d %9d %7.1f%%\n", i, r.requests,
                          r.finished_requests, 100.0 * r.prefix_cache.hit_rate(), r.preemptions,
                          r.evicted_blocks, 100.0 * r.mean_kv_usage);
  }
  return s;
}

// The admissions' tokens by miss cause (docs/design.md §7), first admissions and, if any,
// re-admissions after a preemption.
std::string MissCauseSection(const MissCauseStats& m) {
  std::string s;
  auto table = [&s, &m](const char* title, const MissCauseStats::Totals& t) {
    absl::StrAppendFormat(&s, "%s (%d admissions, %d tokens):\n", title, t.admissions,
                          t.total_tokens());
    // A request with tokens of several causes counts under each; the per-request CSV's miss_cause
    // names only its largest.
    absl::StrAppendFormat(&s, "  %-18s %14s %8s %10s\n", "cause", "tokens", "%", "requests*");
    for (int c = 0; c < kNumMissCauses; ++c) {
      absl::StrAppendFormat(&s, "  %-18s %14d %8.2f %10d\n",
                            std::string(MissCauseName(static_cast<MissCause>(c))), t.tokens[c],
                            Pct(t.tokens[c], t.total_tokens()), t.requests[c]);
    }
    std::string by;
    for (int b = 0; b < kNumEvictionBreakers; ++b) {
      if (t.evicted_tokens_by[b] == 0) continue;
      absl::StrAppendFormat(&by, "%s%s %d", by.empty() ? "" : ", ",
                            std::string(EvictionBreakerName(static_cast<EvictionBreaker>(b))),
                            t.evicted_tokens_by[b]);
    }
    if (!by.empty())
      absl::StrAppend(&s, "  evicted tokens by the group that broke the chain: ", by, "\n");
    if (m.tiers) {
      absl::StrAppendFormat(&s,
                            "  evicted tokens by the offload tiers: %d stored and evicted from a "
                            "tier, %d never stored in one\n",
                            t.tier_evicted_tokens, t.tier_not_stored_tokens);
    }
  };
  table("Why tokens missed, first admissions", m.first);
  if (m.preempted.admissions > 0)
    table("Why tokens missed, re-admissions after preemption", m.preempted);
  s += "  * requests with any token of the cause (a request counts under each of its causes; the "
       "CSV's miss_cause is its largest)\n";
  if (m.forgotten_blocks > 0) {
    absl::StrAppendFormat(
        &s,
        "  APPROXIMATE: to stay within `miss_record_bytes` the replicas "
        "forgot %d blocks they had computed long before; tokens that were "
        "computed then and lost count as elsewhere or compulsory, not evicted. Raise the "
        "bound (0: none) for exact causes.\n",
        m.forgotten_blocks);
  }
  if (m.forgotten_tier_keys > 0) {
    absl::StrAppendFormat(
        &s,
        "  APPROXIMATE: to stay within `miss_record_bytes` the offload tiers forgot %d of the "
        "keys they evicted; tokens whose keys were stored then count as never stored. Raise the "
        "bound (0: none) for exact causes.\n",
        m.forgotten_tier_keys);
  }
  return s;
}

}  // namespace

std::string SignalName(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return absl::StrCat("signal ", signal);
}

std::string OverloadWarning(const ReplayResult& r) {
  if (!r.overloaded) return "";
  const double span = static_cast<double>(r.trace_span_ns) / 1e9;
  const double sim = static_cast<double>(r.sim_time_ns) / 1e9;
  return absl::StrFormat(
      "OVERLOADED: policy %s's engine fell behind the trace: it ran %.0f s for a %.0f s trace "
      "(%.1fx), TTFT mean %.1f s, median %.1f s, p99 %.1f s. Requests queued, so the hit "
      "rate reflects the queue and its preemptions as much as the policy. Replay with enough "
      "replicas to keep up (`replicas=auto` `router=kv_aware`) or with slower arrivals "
      "(`time_scale`).",
      r.policy, sim, span, span > 0 ? sim / span : 0.0, r.ttft.mean_ms / 1e3, r.ttft.p50_ms / 1e3,
      r.ttft.p99_ms / 1e3);
}

std::string ReplayReportText(const ReplayResult& r, const ReportOptions& options) {
  const bool include_wall_time = options.include_wall_time;
  std::string s;
  if (r.overloaded) s += OverloadWarning(r) + "\n";
  const KvPlan& p = r.plan;
  const PrefixCacheStats& pc = r.prefix_cache;
  const int64_t skipped =
      r.skipped_prompt_too_long + r.skipped_does_not_fit + r.skipped_empty_prompt;
  if (r.partial) {
    absl::StrAppendFormat(&s,
                          "PARTIAL: interrupted by %s; the figures cover what was simulated until "
                          "then (%d requests still waiting or running count as not finished)\n",
                          SignalName(r.interrupt_signal), r.interrupted_requests);
  }
  absl::StrAppendFormat(&s, "policy %s: %d requests, %d finished, %d skipped", r.policy, r.requests,
                        r.finished_requests, skipped);
  if (r.partial) absl::StrAppendFormat(&s, ", %d interrupted", r.interrupted_requests);
  if (skipped > 0) {
    absl::StrAppendFormat(&s, " (%d prompt > max_model_len, %d do not fit the KV cache, %d empty)",
                          r.skipped_prompt_too_long, r.skipped_does_not_fit,
                          r.skipped_empty_prompt);
  }
  s += "\n";
  const PlanWaste waste = ComputePlanWaste(p);
  absl::StrAppendFormat(&s,
                        "KV plan: %d groups, scheduler block %d, hash block %d, hit alignment %d, "
                        "%d blocks of %d bytes (%.1f%% padding)\n",
                        p.groups.size(), p.scheduler_block_size, p.hash_block_size, p.hit_alignment,
                        p.num_blocks, p.bytes_per_block, 100.0 * waste.waste_fraction);
  absl::StrAppendFormat(&s,
                        "Prefix cache hit rate: %.2f%% (%d of %d tokens; last %d requests: "
                        "%.2f%%)\n",
                        100.0 * pc.hit_rate(), pc.hits, pc.queries, r.recent_window_requests,
                        100.0 * r.recent_hit_rate);
  if (r.offload.enabled) s += OffloadSection(r);
  if (pc.preempted_requests > 0) {
    absl::StrAppendFormat(&s, "  preempted re-admissions: %d, hit rate %.2f%% (%d of %d)\n",
                          pc.preempted_requests, Pct(pc.preempted_hits, pc.preempted_queries),
                          pc.preempted_hits, pc.preempted_queries);
  }
  absl::StrAppendFormat(&s,
                        "Alignment loss: %d tokens (%.1f per admitted request, %.2f%% of "
                        "queries)\n",
                        r.alignment_loss_tokens,
                        pc.requests > 0 ? static_cast<double>(r.alignment_loss_tokens) /
                                              static_cast<double>(pc.requests)
                                        : 0.0,
                        Pct(r.alignment_loss_tokens, pc.queries));
  absl::StrAppendFormat(&s,
                        "Kept out of the cache by the S round-down: %d computed tokens (%.1f per "
                        "finished request)\n",
                        r.unpublished_alignment_tokens,
                        r.finished_requests > 0
                            ? static_cast<double>(r.unpublished_alignment_tokens) /
                                  static_cast<double>(r.finished_requests)
                            : 0.0);
  absl::StrAppendFormat(&s,
                        "Lost to alignment (vs a shadow cache at the finest block): %d tokens "
                        "(%.1f per admitted request, %.2f%% of queries)\n",
                        r.lost_to_alignment_tokens,
                        pc.requests > 0 ? static_cast<double>(r.lost_to_alignment_tokens) /
                                              static_cast<double>(pc.requests)
                                        : 0.0,
                        Pct(r.lost_to_alignment_tokens, pc.queries));
  if (r.miss_causes.enabled) s += MissCauseSection(r.miss_causes);
  absl::StrAppendFormat(&s,
                        "Blocks: %d cached, %d evicted; preemptions: %d; mean KV usage %.1f%%\n",
                        r.cached_blocks, r.evicted_blocks, r.preemptions, 100.0 * r.mean_kv_usage);
  if (r.spec_decode.num_drafts > 0) {
    absl::StrAppendFormat(&s,
                          "Spec decode: %d drafts, %d draft tokens, %d accepted (%.1f%%), mean "
                          "acceptance length %.3f\n",
                          r.spec_decode.num_drafts, r.spec_decode.draft_tokens,
                          r.spec_decode.accepted_tokens, 100.0 * r.spec_decode.acceptance_rate(),
                          r.spec_decode.mean_acceptance_length());
  }
  absl::StrAppendFormat(&s, "Latency (ms) %10s %10s %10s %10s %10s\n", "mean", "p50", "p90", "p99",
                        "max");
  s += LatencyRow("TTFT", r.ttft);
  s += LatencyRow("TPOT", r.tpot);
  s += LatencyRow("E2E", r.e2e);
  absl::StrAppendFormat(&s,
                        "Throughput: %.2f req/s, %.0f prompt tok/s, %.0f output tok/s (simulated); "
                        "%d steps, %.1f s simulated",
                        r.requests_per_s, r.prompt_tokens_per_s, r.output_tokens_per_s, r.num_steps,
                        static_cast<double>(r.sim_time_ns) / 1e9);
  if (include_wall_time) {
    absl::StrAppendFormat(&s, ", %.2f s wall", r.wall_time_s);
    // The simulator's own speed, what a user sizing a million-request replay wants to know.
    if (r.wall_time_s > 0) {
      absl::StrAppendFormat(&s, " (%.0f requests per wall-second)",
                            static_cast<double>(r.requests) / r.wall_time_s);
    }
  }
  s += "\n";
  if (r.fleet) s += FleetSection(*r.fleet);
  return s;
}

std::string ReplicasAtSloHeadline(const std::vector<ReplayResult>& results) {
  if (results.empty() || !std::all_of(results.begin(), results.end(), [](const ReplayResult& r) {
        return r.fleet && r.fleet->auto_sized;
      })) {
    return "";
  }
  std::vector<size_t> order(results.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return results[a].fleet->replicas < results[b].fleet->replicas;
  });
  const ReplayResult& best = results[order.front()];
  const int fewest = best.fleet->replicas;
  if (results.size() > 1 && results[order.back()].fleet->replicas == fewest) {
    std::vector<std::string> names;
    for (const ReplayResult& r : results) names.push_back(r.policy);
    return absl::StrFormat("policies %s all meet the p99 TTFT SLO of %.0f ms with %d replica%s",
                           absl::StrJoin(names, ", "), best.fleet->ttft_slo_ms, fewest,
                           fewest == 1 ? "" : "s");
  }
  std::string s =
      absl::StrFormat("policy %s meets the p99 TTFT SLO of %.0f ms with %d replica%s", best.policy,
                      best.fleet->ttft_slo_ms, fewest, fewest == 1 ? "" : "s");
  for (size_t k = 1; k < order.size(); ++k) {
    const ReplayResult& r = results[order[k]];
    absl::StrAppendFormat(&s, "%s %s needs %d", k == 1 ? "," : ";", r.policy, r.fleet->replicas);
  }
  if (order.size() > 1) {
    const int saved = results[order.back()].fleet->replicas - best.fleet->replicas;
    if (saved > 0) {
      absl::StrAppendFormat(&s, " (%d replica%s saved)", saved, saved == 1 ? "" : "s");
    }
  }
  return s;
}

std::string ComparisonReportText(const std::vector<ReplayResult>& results) {
  if (results.empty()) return "";
  std::string s;
  if (const std::string headline = ReplicasAtSloHeadline(results); !headline.empty()) {
    s += headline + "\n";
  }
  for (const ReplayResult& r : results) {
    if (!r.partial) continue;
    absl::StrAppendFormat(&s,
                          "PARTIAL: interrupted by %s; each policy's figures cover what it "
                          "simulated until then (queries:",
                          SignalName(r.interrupt_signal));
    for (const ReplayResult& q : results) {
      absl::StrAppendFormat(&s, " %s %d", q.policy, q.prefix_cache.queries);
    }
    s += "), so the deltas compare different stretches of the trace\n";
    break;
  }
  for (const ReplayResult& r : results) {
    if (r.overloaded) s += OverloadWarning(r) + "\n";
  }
  if (std::any_of(results.begin(), results.end(),
                  [](const ReplayResult& r) { return r.overloaded; })) {
    s += "The deltas below compare engines of which one or more were overloaded.\n";
  }
  absl::StrAppendFormat(&s, "%-28s", "");
  for (const ReplayResult& r : results) absl::StrAppendFormat(&s, " %16s", r.policy);
  if (results.size() > 1) {
    for (size_t i = 1; i < results.size(); ++i) {
      absl::StrAppendFormat(&s, " %16s", absl::StrCat(results[i].policy, "-", results[0].policy));
    }
  }
  s += "\n";
  auto row = [&](const char* name, auto get, int decimals) {
    absl::StrAppendFormat(&s, "%-28s", name);
    for (const ReplayResult& r : results) {
      absl::StrAppend(&s, " ", absl::StrFormat("%16s", absl::StrFormat("%.*f", decimals, get(r))));
    }
    for (size_t i = 1; i < results.size(); ++i) {
      absl::StrAppend(
          &s, " ",
          absl::StrFormat(
              "%16s",
              absl::StrCat(get(results[i]) - get(results[0]) >= 0 ? "+" : "",
                           absl::StrFormat("%.*f", decimals, get(results[i]) - get(results[0])))));
    }
    s += "\n";
  };
  using R = const ReplayResult&;
  row(
      "hit rate (%)", [](R r) { return 100.0 * r.prefix_cache.hit_rate(); }, 2);
  row(
      "recent hit rate (%)", [](R r) { return 100.0 * r.recent_hit_rate; }, 2);
  row(
      "hit tokens", [](R r) { return static_cast<double>(r.prefix_cache.hits); }, 0);
  if (results[0].offload.enabled) {
    // The hit split by tier (first admissions), and what each tier wrote for nothing.
    row(
        "hit tokens: GPU", [](R r) { return static_cast<double>(r.offload.gpu_hit_tokens); }, 0);
    for (size_t t = 0; t < results[0].offload.tiers.size(); ++t) {
      const std::string name = absl::StrCat("hit tokens: ", results[0].offload.tiers[t].medium);
      row(
          name.c_str(),
          [t](R r) {
            return t < r.offload.tiers.size() ? static_cast<double>(r.offload.tiers[t].hit_tokens)
                                              : 0.0;
          },
          0);
      const std::string never =
          absl::StrCat(results[0].offload.tiers[t].medium, " stored, never loaded");
      row(
          never.c_str(),
          [t](R r) {
            return t < r.offload.tiers.size()
                       ? static_cast<double>(r.offload.tiers[t].never_loaded_blocks)
                       : 0.0;
          },
          0);
    }
  }
  // Three measures of what the alignment costs, named by what they count (the legend below the
  // table says it in words; the JSON keeps the field names).
  row(
      "cut to A at lookup (tokens)",
      [](R r) { return static_cast<double>(r.alignment_loss_tokens); }, 0);
  row(
      "unpublished by S (tokens)",
      [](R r) { return static_cast<double>(r.unpublished_alignment_tokens); }, 0);
  row(
      "lost to alignment (tokens)",
      [](R r) { return static_cast<double>(r.lost_to_alignment_tokens); }, 0);
  const bool causes =
      std::all_of(results.begin(), results.end(), [](R r) { return r.miss_causes.enabled; });
  if (causes) {
    for (int c = 1; c < kNumMissCauses; ++c) {
      const std::string name =
          absl::StrCat("miss: ", std::string(MissCauseName(static_cast<MissCause>(c))));
      row(
          name.c_str(), [c](R r) { return static_cast<double>(r.miss_causes.first.tokens[c]); }, 0);
    }
    if (std::all_of(results.begin(), results.end(), [](R r) { return r.miss_causes.tiers; })) {
      row(
          "miss: evicted from a tier",
          [](R r) { return static_cast<double>(r.miss_causes.first.tier_evicted_tokens); }, 0);
      row(
          "miss: evicted, never in a tier",
          [](R r) { return static_cast<double>(r.miss_causes.first.tier_not_stored_tokens); }, 0);
    }
  }
  row(
      "hit alignment A", [](R r) { return static_cast<double>(r.plan.hit_alignment); }, 0);
  row(
      "scheduler block S", [](R r) { return static_cast<double>(r.plan.scheduler_block_size); }, 0);
  row(
      "num_blocks", [](R r) { return static_cast<double>(r.plan.num_blocks); }, 0);
  row(
      "padding bytes/block", [](R r) { return ComputePlanWaste(r.plan).padding_bytes_per_block; },
      0);
  row(
      "memory waste (%)", [](R r) { return 100.0 * ComputePlanWaste(r.plan).waste_fraction; }, 2);
  row(
      "evicted blocks", [](R r) { return static_cast<double>(r.evicted_blocks); }, 0);
  row(
      "preemptions", [](R r) { return static_cast<double>(r.preemptions); }, 0);
  row(
      "TTFT mean (ms)", [](R r) { return r.ttft.mean_ms; }, 1);
  row(
      "TTFT p99 (ms)", [](R r) { return r.ttft.p99_ms; }, 1);
  row(
      "TPOT mean (ms)", [](R r) { return r.tpot.mean_ms; }, 2);
  row(
      "E2E mean (ms)", [](R r) { return r.e2e.mean_ms; }, 1);
  row(
      "throughput (req/s)", [](R r) { return r.requests_per_s; }, 3);
  if (results[0].fleet) {
    row(
        "replicas", [](R r) { return r.fleet ? static_cast<double>(r.fleet->replicas) : 1.0; }, 0);
    row(
        "load imbalance", [](R r) { return r.fleet ? r.fleet->imbalance : 1.0; }, 2);
  }
  s += "cut to A at lookup: every group had it cached, the hit had to end on A (JSON "
       "alignment_loss_tokens)\n"
       "unpublished by S: computed, then kept out of the cache by the round-down to S\n"
       "lost to alignment: what a cache aligned to the finest block would have hit more (JSON "
       "lost_to_alignment_tokens)";
  s += causes ? "\nmiss: the first admissions' tokens by cause (docs/design.md section 7)\n" : "\n";
  // The two fleet rows above cannot show how the load and the hits spread over replicas, nor
  // which sizes auto-sizing tried: each policy's fleet as replay prints it.
  for (const ReplayResult& r : results) {
    if (r.fleet) absl::StrAppend(&s, "\n", FleetSection(*r.fleet, r.policy));
  }
  return s;
}

}  // namespace prefixsim
