// The page's summary: one row per figure, one column per policy, and the deltas against the first
// policy coloured by whether they are better.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/report/html_sections.h"

namespace prefixsim {
namespace html_report {
namespace {

struct SummaryRow {
  const char* name;
  double (*get)(const ReplayResult&);
  int decimals;
  bool higher_is_better;
};

constexpr SummaryRow kSummaryRows[] = {
    {"prefix cache hit rate (%)",
     [](const ReplayResult& r) { return 100.0 * r.prefix_cache.hit_rate(); }, 2, true},
    {"hit tokens", [](const ReplayResult& r) { return double(r.prefix_cache.hits); }, 0, true},
    {"queries (tokens)", [](const ReplayResult& r) { return double(r.prefix_cache.queries); }, 0,
     true},
    {"lost to alignment (tokens)",
     [](const ReplayResult& r) { return double(r.lost_to_alignment_tokens); }, 0, false},
    {"lost to alignment (% of queries)",
     [](const ReplayResult& r) { return Pct(r.lost_to_alignment_tokens, r.prefix_cache.queries); },
     2, false},
    {"unpublished by the S round-down (tokens)",
     [](const ReplayResult& r) { return double(r.unpublished_alignment_tokens); }, 0, false},
    {"alignment loss at lookup (tokens)",
     [](const ReplayResult& r) { return double(r.alignment_loss_tokens); }, 0, false},
    {"hit alignment A (tokens)", [](const ReplayResult& r) { return double(r.plan.hit_alignment); },
     0, false},
    {"scheduler block S (tokens)",
     [](const ReplayResult& r) { return double(r.plan.scheduler_block_size); }, 0, false},
    {"KV blocks (num_blocks)", [](const ReplayResult& r) { return double(r.plan.num_blocks); }, 0,
     true},
    {"padding bytes per block",
     [](const ReplayResult& r) { return ComputePlanWaste(r.plan).padding_bytes_per_block; }, 0,
     false},
    {"memory waste to padding (%)",
     [](const ReplayResult& r) { return 100.0 * ComputePlanWaste(r.plan).waste_fraction; }, 2,
     false},
    {"evicted blocks", [](const ReplayResult& r) { return double(r.evicted_blocks); }, 0, false},
    {"preemptions", [](const ReplayResult& r) { return double(r.preemptions); }, 0, false},
    {"TTFT mean (ms)", [](const ReplayResult& r) { return r.ttft.mean_ms; }, 1, false},
    {"TTFT p99 (ms)", [](const ReplayResult& r) { return r.ttft.p99_ms; }, 1, false},
    {"TPOT mean (ms)", [](const ReplayResult& r) { return r.tpot.mean_ms; }, 2, false},
    {"E2E mean (ms)", [](const ReplayResult& r) { return r.e2e.mean_ms; }, 1, false},
    {"E2E p99 (ms)", [](const ReplayResult& r) { return r.e2e.p99_ms; }, 1, false},
    {"throughput (requests/s)", [](const ReplayResult& r) { return r.requests_per_s; }, 3, true},
};

std::string SummaryHead(const std::vector<ReplayResult>& results, bool deltas) {
  std::string s = "<table class=\"summary\"><thead><tr><th>metric</th>";
  for (size_t i = 0; i < results.size(); ++i) {
    absl::StrAppend(&s, "<th>", Swatch(static_cast<int>(i)), Escape(results[i].policy), "</th>");
  }
  if (deltas) {
    for (size_t i = 1; i < results.size(); ++i) {
      absl::StrAppend(&s, "<th>", Escape(results[i].policy), " &minus; ", Escape(results[0].policy),
                      "</th>");
    }
  }
  s += "</tr></thead><tbody>\n";
  return s;
}

std::string SummaryBodyRow(const SummaryRow& row, const std::vector<ReplayResult>& results,
                           bool deltas) {
  std::string s = absl::StrCat("<tr><td>", row.name, "</td>");
  for (const ReplayResult& r : results) {
    absl::StrAppend(&s, "<td>", Number(row.get(r), row.decimals), "</td>");
  }
  if (deltas) {
    for (size_t i = 1; i < results.size(); ++i) {
      const double d = row.get(results[i]) - row.get(results[0]);
      const bool zero = std::abs(d) < 0.5 * std::pow(10.0, -row.decimals);
      const char* cls = zero ? "" : ((d > 0) == row.higher_is_better ? "pos" : "neg");
      absl::StrAppend(&s, "<td class=\"", cls, "\">", !zero && d > 0 ? "+" : "",
                      zero ? Number(0, row.decimals) : Number(d, row.decimals), "</td>");
    }
  }
  s += "</tr>\n";
  return s;
}

// The replicas and the load imbalance, which get no deltas: one engine is a fleet of one, evenly
// loaded (what the text report shows too).
std::string FleetRows(const std::vector<ReplayResult>& results, bool deltas) {
  std::string s = "<tr><td>replicas</td>";
  for (const ReplayResult& r : results) {
    absl::StrAppend(&s, "<td>", r.fleet ? r.fleet->replicas : 1, "</td>");
  }
  if (deltas) {
    for (size_t i = 1; i < results.size(); ++i) s += "<td></td>";
  }
  absl::StrAppend(&s, "</tr>\n<tr><td>load imbalance (max / mean requests)</td>");
  for (const ReplayResult& r : results) {
    absl::StrAppend(&s, "<td>", Number(r.fleet ? r.fleet->imbalance : 1.0, 2), "</td>");
  }
  if (deltas) {
    for (size_t i = 1; i < results.size(); ++i) s += "<td></td>";
  }
  s += "</tr>\n";
  return s;
}

std::string SummaryTable(const std::vector<ReplayResult>& results, bool deltas) {
  std::string s = SummaryHead(results, deltas);
  for (const SummaryRow& row : kSummaryRows) s += SummaryBodyRow(row, results, deltas);
  if (std::any_of(results.begin(), results.end(),
                  [](const ReplayResult& r) { return r.fleet.has_value(); })) {
    s += FleetRows(results, deltas);
  }
  s += "</tbody></table>\n";
  return s;
}

}  // namespace

std::string SummarySection(const PageInputs& page, int fleet_number) {
  std::string s;
  if (const std::string headline = ReplicasAtSloHeadline(page.results); !headline.empty()) {
    absl::StrAppend(&s, "<p class=\"headline\"><b>", Escape(headline), "</b></p>\n");
  }
  s += SummaryTable(page.results, page.deltas);
  s += "<p class=\"note\">Hit rate: vLLM's token-level definition over non-preempted admissions "
       "(reference &sect;12). <b>Lost to alignment</b>: per admission, the hit a shadow cache "
       "would give (the same computed blocks, published at the finest group block U, never "
       "rounded to S) minus the real hit. <b>Unpublished by the S round-down</b>: computed tokens "
       "of finished requests that the hybrid caching rule kept out of the cache.";
  if (page.deltas) s += " Deltas are against the first policy.";
  for (const ReplayResult& r : page.results) {
    if (!r.fleet) continue;
    absl::StrAppend(&s,
                    " Each policy ran a fleet of replicas behind a router; its figures are the "
                    "fleet's totals (per replica in <a href=\"#fleet\">section ",
                    fleet_number, "</a>).");
    break;
  }
  s += "</p>\n";
  return s;
}

}  // namespace html_report
}  // namespace prefixsim
