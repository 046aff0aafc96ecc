// The sections drawn from the per-request records: the hit rate over time, the CDFs of each
// request's hit and of what the alignment cost it, the block-size cliff, and the latency CDFs.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/report/html_sections.h"
#include "sim/util/log2_bins.h"

namespace prefixsim {
namespace html_report {
namespace {

std::string HitRateOverTime(const std::vector<ReplayResult>& results, const ArrivalBins& a) {
  html::ChartSpec c;
  c.id = "hit-rate-over-time";
  c.title = "Prefix cache hit rate over time";
  c.x_label = "arrival time since the first request (s)";
  c.y_label = "hit rate, token-weighted (%)";
  c.y_min = 0;
  c.y_max = 100;
  if (a.bins > 0) {
    for (size_t i = 0; i < results.size(); ++i) {
      c.series.push_back(WindowShareSeries(
          results[i], static_cast<int>(i), a, [](const RequestRecord& r) { return r.hit_tokens; },
          [](const RequestRecord& r) { return r.prompt_tokens; }));
    }
    c.note =
        absl::StrCat("Requests grouped into ", a.bins, " windows of ", Number(a.width_ns / 1e9, 1),
                     " s by arrival; hit tokens / prompt tokens of each window's requests "
                     "(first admission).");
  }
  return html::LineChart(c);
}

// The CDF of one figure of the finished requests, a line per policy. A latency gets a log x axis
// when it spans a wide range; a token figure starts its x axis at 0 and names the policies whose
// figure is 0 for every request, since their step hides on the y axis.
std::string Cdf(const std::vector<ReplayResult>& results, const std::string& id,
                const std::string& title, const std::string& x_label,
                double (*get)(const RequestRecord&), bool latency, const std::string& note) {
  html::ChartSpec c;
  c.id = id;
  c.title = title;
  c.x_label = x_label;
  c.y_label = "fraction of requests (%)";
  c.y_min = 0;
  c.y_max = 100;
  double lo = INFINITY, hi = 0;
  std::vector<std::string> zero;
  for (size_t i = 0; i < results.size(); ++i) {
    std::vector<double> v;
    for (const RequestRecord& rec : results[i].per_request) {
      if (!rec.skipped.empty() || rec.finish_ns < 0) continue;
      v.push_back(get(rec));
      if (v.back() > 0) lo = std::min(lo, v.back());
      hi = std::max(hi, v.back());
    }
    if (!latency && !v.empty() && *std::max_element(v.begin(), v.end()) == 0) {
      zero.push_back(results[i].policy);
    }
    html::Series s = html::CdfSeries(results[i].policy, std::move(v), static_cast<int>(i));
    for (auto& p : s.points) p.second *= 100.0;
    c.series.push_back(std::move(s));
  }
  if (latency && std::isfinite(lo) && hi / lo > 50) c.log_x = true;
  if (!latency) c.x_min = 0;
  c.note = note;
  if (!zero.empty()) {
    absl::StrAppend(&c.note, " ", Escape(absl::StrJoin(zero, ", ")),
                    ": 0 for every request (the line on the y axis).");
  }
  return html::LineChart(c);
}

// ---- the block-size cliff ----
//
// Hit fraction by prompt length (power-of-two bins, token-weighted, first admissions) per policy,
// with each policy's A and S marked, then, per policy, the requests too short to ever hit, and the
// bins as a table. A hit is at most floor((L-1) / A) * A (docs/semantics.md §9.1, §9.3), so
// prompts of at most A tokens never hit: vLLM #40696 (0% below 528 tokens), vllm-ascend #16270
// (0% below 4096 tokens, the LCM of the groups' blocks).

// One policy's served requests by prompt length, and those of at most A tokens.
struct CliffCounts {
  Log2TokenBins bins;
  int64_t served = 0, short_requests = 0;
  int64_t prompt_tokens = 0, short_tokens = 0;
};

CliffCounts CountCliff(const ReplayResult& r) {
  CliffCounts n;
  const int64_t a = r.plan.hit_alignment;
  for (const RequestRecord& rec : r.per_request) {
    if (!rec.skipped.empty()) continue;
    n.bins.Add(rec.prompt_tokens, rec.hit_tokens);
    ++n.served;
    n.prompt_tokens += rec.prompt_tokens;
    if (rec.prompt_tokens < a + 1) {
      ++n.short_requests;
      n.short_tokens += rec.prompt_tokens;
    }
  }
  return n;
}

std::string CliffChart(const std::vector<ReplayResult>& results,
                       const std::vector<CliffCounts>& counts) {
  html::ChartSpec c;
  c.id = "block-size-cliff";
  c.title = "Block-size cliff: hit fraction by prompt length";
  c.x_label = "prompt length (tokens, log scale)";
  c.y_label = "hit tokens / prompt tokens (%)";
  c.log2_x = true;
  c.y_min = 0;
  c.y_max = 100;
  for (size_t i = 0; i < results.size(); ++i) {
    const Log2TokenBins& bins = counts[i].bins;
    html::Series s;
    s.name = results[i].policy;
    s.color = static_cast<int>(i);
    s.dots = true;
    for (int k = std::max(1, bins.First()); k <= bins.Last(); ++k) {
      if (bins.prompt_tokens[k] == 0) continue;
      // The bin's middle on the log scale: 2^(k-1) * sqrt(2).
      s.points.emplace_back(static_cast<double>(Log2BinMin(k)) * std::sqrt(2.0),
                            100.0 * bins.HitFraction(k));
    }
    c.series.push_back(std::move(s));
    const int64_t a = results[i].plan.hit_alignment;
    const int64_t sb = results[i].plan.scheduler_block_size;
    const int color = static_cast<int>(i);
    if (a == sb) {
      c.markers.push_back({static_cast<double>(a),
                           absl::StrCat(results[i].policy, ": A = S = ", Thousands(a)), color});
    } else {
      c.markers.push_back(
          {static_cast<double>(a), absl::StrCat(results[i].policy, ": A = ", Thousands(a)), color});
      c.markers.push_back({static_cast<double>(sb),
                           absl::StrCat(results[i].policy, ": S = ", Thousands(sb)), color});
    }
  }
  c.note =
      "Served requests in power-of-two prompt-length bins (each drawn at its middle): hit tokens "
      "/ prompt tokens at the first admission. A hit is at most floor((L&minus;1) / A) &middot; A "
      "tokens, since the last prompt token is always recomputed (reference &sect;9.1, &sect;9.3): "
      "a prompt of at most A tokens never hits, so each policy's curve stays at 0 in the bins "
      "that end at or below its A line. "
      "S, the scheduler block, is the granularity at which the hybrid caching rule publishes "
      "computed blocks (&sect;10.2); an EAGLE/MTP drafter's drop (&sect;9.4) moves the cliff "
      "further right.";
  return html::LineChart(c);
}

std::string NeverHitList(const std::vector<ReplayResult>& results,
                         const std::vector<CliffCounts>& counts) {
  std::string out = "<ul class=\"cliff-policies\">";
  for (size_t i = 0; i < results.size(); ++i) {
    const CliffCounts& n = counts[i];
    const int64_t a = results[i].plan.hit_alignment;
    absl::StrAppend(
        &out, "<li data-policy=\"", Escape(results[i].policy), "\" data-hit-alignment=\"", a,
        "\" data-scheduler-block=\"", results[i].plan.scheduler_block_size,
        "\" data-never-hit-short-requests=\"", n.short_requests, "\">", Swatch(static_cast<int>(i)),
        Escape(results[i].policy), ": ", Thousands(n.short_requests), " of ", Thousands(n.served),
        " served requests (", Number(Pct(n.short_requests, n.served), 1), "%; ",
        Number(Pct(n.short_tokens, n.prompt_tokens), 1),
        "% of prompt tokens) have at most A = ", Thousands(a), " tokens and can never hit</li>");
  }
  out += "</ul>";
  return out;
}

std::string CliffTable(const std::vector<ReplayResult>& results,
                       const std::vector<CliffCounts>& counts) {
  int first = Log2TokenBins::kBins, last = -1;
  for (const CliffCounts& n : counts) {
    first = std::min(first, std::max(1, n.bins.First()));  // an empty prompt has no log x
    last = std::max(last, n.bins.Last());
  }
  std::string out = "<table class=\"cliff\"><thead><tr><th>prompt tokens</th>";
  for (const ReplayResult& r : results) {
    absl::StrAppend(&out, "<th>", Escape(r.policy), " requests</th><th>", Escape(r.policy),
                    " hit (%)</th>");
  }
  out += "</tr></thead><tbody>";
  for (int k = first; k <= last; ++k) {
    absl::StrAppend(&out, "<tr data-min-tokens=\"", Log2BinMin(k), "\"><td>",
                    Thousands(Log2BinMin(k)), "&ndash;", Thousands(Log2BinMax(k)), "</td>");
    for (const CliffCounts& n : counts) {
      absl::StrAppend(
          &out, "<td>", Thousands(n.bins.requests[k]), "</td><td>",
          n.bins.prompt_tokens[k] > 0 ? Number(100.0 * n.bins.HitFraction(k), 1) : "&ndash;",
          "</td>");
    }
    out += "</tr>";
  }
  out += "</tbody></table>";
  return out;
}

std::string BlockSizeCliff(const std::vector<ReplayResult>& results) {
  std::vector<CliffCounts> counts;
  counts.reserve(results.size());
  for (const ReplayResult& r : results) counts.push_back(CountCliff(r));
  return absl::StrCat("<div class=\"row\"><section>", CliffChart(results, counts),
                      NeverHitList(results, counts), "</section>\n<section>",
                      CliffTable(results, counts), "</section></div>\n");
}

}  // namespace

ArrivalBins BinArrivals(const std::vector<ReplayResult>& results) {
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  size_t n = 0;
  for (const ReplayResult& r : results) {
    for (const RequestRecord& rec : r.per_request) {
      if (!rec.skipped.empty()) continue;
      t0 = std::min(t0, rec.arrival_ns);
      t1 = std::max(t1, rec.arrival_ns);
      n = std::max(n, r.per_request.size());
    }
  }
  ArrivalBins a;
  if (n == 0) return a;
  a.t0 = t0;
  a.bins = static_cast<int>(std::clamp<size_t>(n / 10, 1, 40));
  a.width_ns = std::max<double>(1.0, static_cast<double>(t1 - t0)) / a.bins;
  return a;
}

std::string HitRateOverTimeSection(const PageInputs& page, int number) {
  return absl::StrCat("<h2>", number, ". Hit rate over time</h2>\n<div class=\"charts\">",
                      HitRateOverTime(page.results, page.arrival_bins), "</div>\n");
}

std::string PerRequestSection(const PageInputs& page, int number) {
  std::string s =
      absl::StrCat("<h2>", number, ". Per-request hit and loss</h2>\n<div class=\"charts\">");
  s += Cdf(
      page.results, "cdf-hit-fraction", "CDF of the per-request hit fraction",
      "hit tokens / prompt tokens (%)",
      [](const RequestRecord& r) {
        return r.prompt_tokens > 0 ? 100.0 * r.hit_tokens / r.prompt_tokens : 0.0;
      },
      false, "At each request's first admission.");
  s += Cdf(
      page.results, "cdf-lost-to-alignment", "CDF of tokens lost to alignment per request",
      "tokens lost to alignment (tokens)",
      [](const RequestRecord& r) { return static_cast<double>(r.lost_to_alignment_tokens); }, false,
      "Shadow hit minus real hit at the first admission; 0 when A equals the finest block.");
  s += "</div>\n";
  s += BlockSizeCliff(page.results);
  return s;
}

std::string LatencySection(const PageInputs& page, int number) {
  std::string s = absl::StrCat("<h2>", number, ". Latency</h2>\n<div class=\"charts\">");
  s += Cdf(
      page.results, "cdf-ttft", "CDF of time to first token", "TTFT (ms)",
      [](const RequestRecord& r) { return (r.first_token_ns - r.arrival_ns) / 1e6; }, true,
      "Simulated: arrival to the end of the step that finishes the prefill.");
  s += Cdf(
      page.results, "cdf-e2e", "CDF of end-to-end latency", "end-to-end latency (ms)",
      [](const RequestRecord& r) { return (r.finish_ns - r.arrival_ns) / 1e6; }, true,
      "Simulated: arrival to the last output token.");
  s += "</div>\n";
  return s;
}

}  // namespace html_report
}  // namespace prefixsim
