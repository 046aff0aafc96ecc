// The A/B report page (`compare --html`, `replay --html`): one self-contained HTML file with
// inline CSS and SVG (html_charts.h) and a few lines of inline script that only verify the page
// (count each chart's drawn elements into data attributes). No network at view time.
//
// Sections: summary table (deltas against the first policy), the KV plan side by side with the
// LCM arithmetic, hit rate over time, CDFs of per-request hit fraction and of tokens lost to the
// alignment, the block-size cliff (hit fraction by prompt length, each policy's A and S marked),
// why tokens missed (the tokens by miss cause as stacked bars and tables, each cause's share over
// time; docs/design.md §7) when the replays attributed their misses, TTFT and E2E CDFs, hit rate
// vs KV cache bytes, `analyze`'s alignment curve with each policy's A marked, and for fleet runs
// the router, the auto-sizing probes and the per-replica table with bar charts of load and hit
// rate.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "prefixsim/analyze.h"
#include "prefixsim/miss_causes.h"
#include "prefixsim/model.h"
#include "sim/report/html_charts.h"
#include "sim/report/report.h"
#include "sim/util/log2_bins.h"

namespace prefixsim {
namespace {

using html::Escape;
using html::Number;
using html::Thousands;

constexpr const char* kStyle = R"css(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em 2em;color:#222;max-width:1340px}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.sub{color:#555;margin-top:0}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:3px 9px;text-align:right;font-variant-numeric:tabular-nums}
th:first-child,td:first-child{text-align:left}thead{background:#f3f3f3}
.pos{color:#1a7f37}.neg{color:#c62828}
.plans{display:flex;flex-wrap:wrap;gap:1.2em}.plan{box-sizing:border-box;border:1px solid #ddd;border-radius:6px;padding:.6em 1em;flex:1 1 0;min-width:520px;font-size:.92em}
.row{display:flex;flex-wrap:wrap;gap:0 1.5em}.row>section{flex:0 0 auto;max-width:660px}.row table{font-size:.9em}.plan ul{padding-left:1.2em;margin:.4em 0}
.plan h3{margin:.2em 0 .4em 0}.math{font-family:ui-monospace,Menlo,monospace;background:#f7f7f7;padding:.15em .4em;border-radius:3px}
.charts{display:flex;flex-wrap:wrap;gap:.5em 1.5em}figure.chart{margin:.5em 0}figcaption{font-weight:600;margin-bottom:.2em}
p.note{font-size:.85em;color:#555;max-width:640px;margin:.2em 0}
caption{text-align:left;font-weight:600;padding:.2em 0}.tables{display:flex;flex-wrap:wrap;gap:0 1.5em}ul.miss-cause-legend{padding-left:1.2em;font-size:.9em;max-width:600px}ul.miss-cause-legend li{margin:.25em 0}
.swatch{display:inline-block;width:.8em;height:.8em;border-radius:2px;margin-right:.3em;vertical-align:-1px}
)css";

// Counts drawn elements per chart into data attributes (the browser test reads them back).
constexpr const char* kVerifyScript = R"js(
<script>
(function(){
  var errors = 0;
  window.addEventListener('error', function(){ errors++; document.body.dataset.jsErrors = errors; });
  window.addEventListener('load', function(){
    var figs = document.querySelectorAll('figure.chart');
    var drawn = 0;
    figs.forEach(function(f){
      var n = f.querySelectorAll('svg .mark').length;
      f.dataset.drawn = n;
      if (n > 0) drawn++;
    });
    document.body.dataset.charts = figs.length;
    document.body.dataset.chartsDrawn = drawn;
    document.body.dataset.jsErrors = errors;
    document.body.dataset.verified = 'yes';
  });
})();
</script>
)js";

double Pct(int64_t a, int64_t b) { return b > 0 ? 100.0 * static_cast<double>(a) / b : 0.0; }

int64_t Gcd(int64_t a, int64_t b) { return b == 0 ? a : Gcd(b, a % b); }

std::string Joined(const std::set<int64_t>& v) {
  std::vector<std::string> s;
  for (int64_t x : v) s.push_back(Thousands(x));
  return absl::StrJoin(s, ", ");
}

// The finest prefix-cacheable block size (the shadow granularity U, sim/kv/README.md).
int64_t FinestBlock(const KvPlan& p) {
  int64_t u = 0;
  for (const KvGroup& g : p.groups) {
    if (g.prefix_cacheable && (u == 0 || g.block_size < u)) u = g.block_size;
  }
  return u;
}

std::string Swatch(int i) {
  return absl::StrFormat("<span class=\"swatch\" style=\"background:%s\"></span>", html::Color(i));
}

// ---- summary table ----

std::string SummaryTable(const std::vector<ReplayResult>& results, bool deltas) {
  struct Row {
    const char* name;
    double (*get)(const ReplayResult&);
    int decimals;
    bool higher_is_better;
  };
  static const Row kRows[] = {
      {"prefix cache hit rate (%)",
       [](const ReplayResult& r) { return 100.0 * r.prefix_cache.hit_rate(); }, 2, true},
      {"hit tokens", [](const ReplayResult& r) { return double(r.prefix_cache.hits); }, 0, true},
      {"queries (tokens)", [](const ReplayResult& r) { return double(r.prefix_cache.queries); }, 0,
       true},
      {"lost to alignment (tokens)",
       [](const ReplayResult& r) { return double(r.lost_to_alignment_tokens); }, 0, false},
      {"lost to alignment (% of queries)",
       [](const ReplayResult& r) {
         return Pct(r.lost_to_alignment_tokens, r.prefix_cache.queries);
       },
       2, false},
      {"unpublished by the S round-down (tokens)",
       [](const ReplayResult& r) { return double(r.unpublished_alignment_tokens); }, 0, false},
      {"alignment loss at lookup (tokens)",
       [](const ReplayResult& r) { return double(r.alignment_loss_tokens); }, 0, false},
      {"hit alignment A (tokens)",
       [](const ReplayResult& r) { return double(r.plan.hit_alignment); }, 0, false},
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
  for (const Row& row : kRows) {
    absl::StrAppend(&s, "<tr><td>", row.name, "</td>");
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
  }
  if (std::any_of(results.begin(), results.end(),
                  [](const ReplayResult& r) { return r.fleet.has_value(); })) {
    // One engine is a fleet of one, evenly loaded (what the text report shows too).
    absl::StrAppend(&s, "<tr><td>replicas</td>");
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
  }
  s += "</tbody></table>\n";
  return s;
}

// ---- the KV plan ----

std::string PlanCard(const ReplayResult& r, int index) {
  const KvPlan& p = r.plan;
  std::string s = absl::StrCat("<div class=\"plan\"><h3>", Swatch(index), Escape(r.policy),
                               "</h3>\n<table><thead><tr><th>group kind</th><th>groups</th>"
                               "<th>layers</th><th>block size (tokens)</th><th>page bytes</th>"
                               "<th>padding bytes / page</th><th>drafter</th></tr></thead><tbody>");
  // Groups of one kind with the same shape collapse into one row.
  std::map<std::tuple<std::string, int, int64_t, int64_t, bool>, std::pair<int, int>> rows;
  std::vector<std::tuple<std::string, int, int64_t, int64_t, bool>> order;
  for (const KvGroup& g : p.groups) {
    auto key = std::make_tuple(std::string(LayerKindName(g.kind)), g.block_size, g.page_bytes,
                               g.padding_bytes, g.drafter());
    auto [it, inserted] = rows.try_emplace(key, 0, 0);
    if (inserted) order.push_back(key);
    it->second.first += 1;
    it->second.second += g.num_layers;
  }
  for (const auto& key : order) {
    const auto& [kind, block, page, padding, drafter] = key;
    const auto& [groups, layers] = rows[key];
    absl::StrAppend(&s, "<tr><td>", Escape(kind), "</td><td>", groups, "</td><td>", layers,
                    "</td><td>", Thousands(block), "</td><td>", Thousands(page), "</td><td>",
                    Thousands(padding),
                    page > 0 ? absl::StrFormat(" (%.1f%%)", 100.0 * padding / page) : "",
                    "</td><td>", drafter ? "yes" : "", "</td></tr>");
  }
  s += "</tbody></table>\n<ul>";
  std::set<int64_t> all, cacheable;
  for (const KvGroup& g : p.groups) {
    all.insert(g.block_size);
    if (g.prefix_cacheable) cacheable.insert(g.block_size);
  }
  if (all.size() > 1) {
    absl::StrAppend(&s, "<li>scheduler block <span class=\"math\">S = lcm(", Joined(all),
                    ") = ", Thousands(p.scheduler_block_size), "</span></li>");
  } else {
    absl::StrAppend(&s, "<li>scheduler block <span class=\"math\">S = ",
                    Thousands(p.scheduler_block_size), "</span> (one block size)</li>");
  }
  int64_t g = 0;
  for (int64_t b : cacheable) g = Gcd(b, g);
  if (cacheable.size() > 1 && g == p.hash_block_size) {
    absl::StrAppend(&s, "<li>hash block <span class=\"math\">H = gcd(", Joined(cacheable),
                    ") = ", Thousands(p.hash_block_size), "</span></li>");
  } else {
    absl::StrAppend(&s, "<li>hash block <span class=\"math\">H = ", Thousands(p.hash_block_size),
                    "</span>", g == p.hash_block_size ? "" : " (prefix_match_unit)", "</li>");
  }
  absl::StrAppend(&s, "<li>hit alignment <span class=\"math\">A = ",
                  p.hit_alignment == p.hash_block_size && p.partial_hits ? "H" : "S", " = ",
                  Thousands(p.hit_alignment), "</span>",
                  p.partial_hits ? " (fine-grained hits)" : "", "</li>");
  const int64_t u = FinestBlock(p);
  if (u > 0 && u < p.hit_alignment) {
    absl::StrAppend(&s, "<li>finest group block <span class=\"math\">U = ", Thousands(u),
                    "</span>: a hit can lose up to <span class=\"math\">A &minus; U = ",
                    Thousands(p.hit_alignment - u), "</span> tokens (&asymp; ",
                    Thousands(p.hit_alignment / 2), " on average)</li>");
  } else {
    s += "<li>A equals the finest group block: nothing is lost to the alignment</li>";
  }
  const PlanWaste w = ComputePlanWaste(p);
  absl::StrAppend(&s, "<li>", Thousands(p.num_blocks), " blocks of ", Thousands(p.bytes_per_block),
                  " bytes (", html::Bytes(p.bytes_per_block), "); padding ",
                  Number(w.padding_bytes_per_block, 0), " bytes per block (",
                  Number(100.0 * w.waste_fraction, 2), "%)</li></ul></div>\n");
  return s;
}

// ---- hit rate over time ----

// Windows of arrival time over the served requests of every result, shared by the hit rate over
// time and the miss causes over time so that their x axes agree: about 10 requests a window (the
// largest result's), between 1 and 40 windows.
struct ArrivalBins {
  int64_t t0 = 0;
  int bins = 0;  // 0: no served request
  double width_ns = 1;
  int Of(int64_t arrival_ns) const {
    return std::min(bins - 1, static_cast<int>(static_cast<double>(arrival_ns - t0) / width_ns));
  }
  double MiddleS(int b) const { return (b + 0.5) * width_ns / 1e9; }
};

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

// One policy's line over the arrival windows: Σ num / Σ den (%) of each window's served
// requests; windows with no denominator get no point.
template <typename Num, typename Den>
html::Series WindowShareSeries(const ReplayResult& r, int color, const ArrivalBins& a, Num num,
                               Den den) {
  html::Series s;
  s.name = r.policy;
  s.color = color;
  s.dots = true;
  if (a.bins == 0) return s;
  std::vector<int64_t> part(a.bins, 0), whole(a.bins, 0);
  for (const RequestRecord& rec : r.per_request) {
    if (!rec.skipped.empty()) continue;
    const int b = a.Of(rec.arrival_ns);
    part[b] += num(rec);
    whole[b] += den(rec);
  }
  for (int b = 0; b < a.bins; ++b) {
    if (whole[b] > 0) s.points.emplace_back(a.MiddleS(b), Pct(part[b], whole[b]));
  }
  return s;
}

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

// ---- per-request CDFs ----

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
      zero.push_back(results[i].policy);  // its step sits on the y axis: say so
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

// Hit fraction by prompt length (power-of-two bins, token-weighted, first admissions) per policy,
// with each policy's A and S marked, then the bins as a table and, per policy, the requests too
// short to ever hit. A hit is at most floor((L-1) / A) * A (docs/semantics.md §9.1, §9.3), so
// prompts of at most A tokens never hit: vLLM #40696 (0% below 528 tokens), vllm-ascend #16270
// (0% below 4096 tokens, the LCM of the groups' blocks).
std::string BlockSizeCliff(const std::vector<ReplayResult>& results) {
  std::vector<Log2TokenBins> bins(results.size());
  std::vector<int64_t> served(results.size(), 0), short_requests(results.size(), 0);
  std::vector<int64_t> prompt_tokens(results.size(), 0), short_tokens(results.size(), 0);
  int first = Log2TokenBins::kBins, last = -1;
  for (size_t i = 0; i < results.size(); ++i) {
    const int64_t a = results[i].plan.hit_alignment;
    for (const RequestRecord& rec : results[i].per_request) {
      if (!rec.skipped.empty()) continue;
      bins[i].Add(rec.prompt_tokens, rec.hit_tokens);
      ++served[i];
      prompt_tokens[i] += rec.prompt_tokens;
      if (rec.prompt_tokens < a + 1) {
        ++short_requests[i];
        short_tokens[i] += rec.prompt_tokens;
      }
    }
    first = std::min(first, std::max(1, bins[i].First()));  // an empty prompt has no log x
    last = std::max(last, bins[i].Last());
  }
  html::ChartSpec c;
  c.id = "block-size-cliff";
  c.title = "Block-size cliff: hit fraction by prompt length";
  c.x_label = "prompt length (tokens, log scale)";
  c.y_label = "hit tokens / prompt tokens (%)";
  c.log2_x = true;
  c.y_min = 0;
  c.y_max = 100;
  for (size_t i = 0; i < results.size(); ++i) {
    html::Series s;
    s.name = results[i].policy;
    s.color = static_cast<int>(i);
    s.dots = true;
    for (int k = std::max(1, bins[i].First()); k <= bins[i].Last(); ++k) {
      if (bins[i].prompt_tokens[k] == 0) continue;
      // The bin's middle on the log scale: 2^(k-1) * sqrt(2).
      s.points.emplace_back(static_cast<double>(Log2BinMin(k)) * std::sqrt(2.0),
                            100.0 * bins[i].HitFraction(k));
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
  std::string out = "<div class=\"row\"><section>";
  out += html::LineChart(c);
  out += "<ul class=\"cliff-policies\">";
  for (size_t i = 0; i < results.size(); ++i) {
    const int64_t a = results[i].plan.hit_alignment;
    absl::StrAppend(
        &out, "<li data-policy=\"", Escape(results[i].policy), "\" data-hit-alignment=\"", a,
        "\" data-scheduler-block=\"", results[i].plan.scheduler_block_size,
        "\" data-never-hit-short-requests=\"", short_requests[i], "\">",
        Swatch(static_cast<int>(i)), Escape(results[i].policy), ": ", Thousands(short_requests[i]),
        " of ", Thousands(served[i]), " served requests (",
        Number(Pct(short_requests[i], served[i]), 1), "%; ",
        Number(Pct(short_tokens[i], prompt_tokens[i]), 1),
        "% of prompt tokens) have at most A = ", Thousands(a), " tokens and can never hit</li>");
  }
  out += "</ul></section>\n<section><table class=\"cliff\"><thead><tr><th>prompt tokens</th>";
  for (const ReplayResult& r : results) {
    absl::StrAppend(&out, "<th>", Escape(r.policy), " requests</th><th>", Escape(r.policy),
                    " hit (%)</th>");
  }
  out += "</tr></thead><tbody>";
  for (int k = first; k <= last; ++k) {
    absl::StrAppend(&out, "<tr data-min-tokens=\"", Log2BinMin(k), "\"><td>",
                    Thousands(Log2BinMin(k)), "&ndash;", Thousands(Log2BinMax(k)), "</td>");
    for (size_t i = 0; i < results.size(); ++i) {
      absl::StrAppend(
          &out, "<td>", Thousands(bins[i].requests[k]), "</td><td>",
          bins[i].prompt_tokens[k] > 0 ? Number(100.0 * bins[i].HitFraction(k), 1) : "&ndash;",
          "</td>");
    }
    out += "</tr>";
  }
  out += "</tbody></table></section></div>\n";
  return out;
}

// ---- why tokens missed ----

// One colour per cause on the whole page, apart from the policies' palette: green for the hit,
// reds for what a block-size policy recovers (alignment, not_checkpointed), orange for what the
// retention interval recovers (sparse_retention), yellow for work in progress, purple for what
// memory recovers (evicted), teal for what a router recovers (elsewhere), greys for what nothing
// recovers (compulsory, tail). In MissCause order.
constexpr const char* kCauseColors[kNumMissCauses] = {"#4e9f50", "#b8312f", "#e8746a",
                                                      "#f28e2b", "#edc948", "#8f6bb3",
                                                      "#3fa3a6", "#7f7f7f", "#c7c7c7"};

// What each cause means, in MissCause order (docs/design.md §7 has the exact definitions).
constexpr const char* kCauseMeanings[kNumMissCauses] = {
    "served from the cache.",
    "what the LCM costs: computed on this replica, but the round-down to the scheduler block S "
    "kept it unpublished (the PR #53007 case), or every group has it cached at its own block "
    "boundary and the hit is cut back to a multiple of the hit alignment A, or another replica "
    "holds it but could not serve it either. A block-size policy recovers it.",
    "computed and published on this replica, but a group never cached what a hit there needs, "
    "under any retention interval: a mamba state between checkpoints (no step ended there) or "
    "skipped in a verify step, a sliding window never whole. No pool size recovers it; the plan "
    "can.",
    "computed and published on this replica, but the retention interval "
    "(prefix_cache_retention_interval) left unpublished a sliding window or mamba state that "
    "dense retention would have cached (vLLM's sparse-retention misses). Dense retention, or a "
    "smaller interval, recovers it.",
    "another request on this replica is computing it right now.",
    "computed before (in a hybrid plan: cached by every group) and evicted since; the table "
    "names the group kind whose lookup broke the chain (or other_replica). More KV memory "
    "recovers it.",
    "another replica's own lookup would have hit it when the request arrived: a routing miss, "
    "which a router recovers (the routing regret's definition).",
    "no replica had computed it when the request arrived: the prefix's first occurrence. "
    "Nothing recovers it.",
    "no lookup rule lets it hit: the last prompt token (always recomputed), the partial last "
    "block, an EAGLE drafter's drop. Nothing recovers it.",
};

std::string CauseName(int c) { return std::string(MissCauseName(static_cast<MissCause>(c))); }

std::string CauseSwatch(int c) {
  return absl::StrFormat("<span class=\"swatch\" style=\"background:%s\"></span>", kCauseColors[c]);
}

// Chart ids keep to [a-z0-9-]: "not_checkpointed" -> "not-checkpointed".
std::string CauseId(int c) {
  std::string id = CauseName(c);
  std::replace(id.begin(), id.end(), '_', '-');
  return id;
}

using MissTotals = MissCauseStats::Totals;
using MissTotalsOf = const MissTotals& (*)(const ReplayResult&);
const MissTotals& FirstAdmissions(const ReplayResult& r) { return r.miss_causes.first; }
const MissTotals& PreemptedAdmissions(const ReplayResult& r) { return r.miss_causes.preempted; }

// A delta cell of a miss-cause table: signed tokens, green when better (more hit, fewer misses),
// uncoloured for counts that are neither.
std::string MissDeltaCell(int64_t d, int better_sign) {
  const char* cls = d == 0 || better_sign == 0 ? "" : (d > 0) == (better_sign > 0) ? "pos" : "neg";
  return absl::StrCat("<td class=\"", cls, "\">", d > 0 ? "+" : "", Thousands(d), "</td>");
}

// Stacked bars of the tokens by cause: one bar per policy for the first admissions, and when
// some policy re-admitted preempted requests, one more per policy for those. `shown`: the results
// that attributed their misses.
std::string MissCauseBars(const std::vector<ReplayResult>& results,
                          const std::vector<size_t>& shown, bool preempted) {
  std::vector<std::string> labels;
  std::vector<const MissTotals*> bars;
  for (MissTotalsOf of : {&FirstAdmissions, &PreemptedAdmissions}) {
    if (of == &PreemptedAdmissions && !preempted) break;
    for (size_t i : shown) {
      labels.push_back(!preempted               ? results[i].policy
                       : of == &FirstAdmissions ? results[i].policy + ": first"
                                                : results[i].policy + ": preempted");
      bars.push_back(&of(results[i]));
    }
  }
  html::ChartSpec c;
  c.id = "miss-causes";
  c.title = preempted ? "Why tokens missed: first admissions and re-admissions after a preemption"
                      : "Why tokens missed: first admissions";
  c.x_label = "share of the tokens looked up (%)";
  c.x_tick = [labels](double v) { return labels[static_cast<size_t>(std::lround(v))]; };
  c.y_tick = [](double v) { return Thousands(std::llround(v)) + " tokens"; };
  for (int k = 0; k < kNumMissCauses; ++k) {
    html::Series s;
    s.name = CauseName(k);
    s.css_color = kCauseColors[k];
    for (size_t b = 0; b < bars.size(); ++b) {
      s.points.emplace_back(static_cast<double>(b), static_cast<double>(bars[b]->tokens[k]));
    }
    c.series.push_back(std::move(s));
  }
  c.note =
      "Each bar splits the tokens its admissions looked up (the prompt at a first admission; "
      "prompt and outputs at a re-admission after a preemption) into causes, left to right in "
      "the order they take tokens; a segment's tooltip gives its tokens.";
  return html::StackedShareBarChart(c);
}

// Per cause, tokens and share per policy and the deltas against the first shown policy, then
// the evicted tokens by the group kind that broke the chain, where some policy has any.
std::string MissCauseTable(const std::vector<ReplayResult>& results,
                           const std::vector<size_t>& shown, bool deltas, MissTotalsOf of,
                           const char* kind, const char* caption) {
  deltas = deltas && shown.size() > 1;
  const ReplayResult& base = results[shown[0]];
  std::string s = absl::StrCat("<table class=\"miss-causes\" data-admissions=\"", kind,
                               "\"><caption>", caption, "</caption><thead><tr><th>cause</th>");
  for (size_t i : shown) {
    absl::StrAppend(&s, "<th>", Swatch(static_cast<int>(i)), Escape(results[i].policy),
                    " (tokens)</th><th>", Escape(results[i].policy), " (%)</th>");
  }
  if (deltas) {
    for (size_t k = 1; k < shown.size(); ++k) {
      absl::StrAppend(&s, "<th>", Escape(results[shown[k]].policy), " &minus; ",
                      Escape(base.policy), " (tokens)</th>");
    }
  }
  s += "</tr></thead><tbody>\n";
  // One row: its name cell, then tokens and % per policy, then the deltas.
  auto row = [&](const std::string& head, auto get, bool with_share, int better_sign) {
    s += head;
    for (size_t i : shown) {
      const MissTotals& t = of(results[i]);
      absl::StrAppend(&s, "<td>", Thousands(get(t)), "</td><td>",
                      with_share ? Number(Pct(get(t), t.total_tokens()), 2) : "", "</td>");
    }
    if (deltas) {
      for (size_t k = 1; k < shown.size(); ++k) {
        s += MissDeltaCell(get(of(results[shown[k]])) - get(of(base)), better_sign);
      }
    }
    s += "</tr>\n";
  };
  for (int c = 0; c < kNumMissCauses; ++c) {
    row(
        absl::StrCat("<tr data-cause=\"", CauseName(c), "\"><td>", CauseSwatch(c), CauseName(c),
                     "</td>"),
        [c](const MissTotals& t) { return t.tokens[c]; }, true, c == 0 ? 1 : -1);
    if (static_cast<MissCause>(c) != MissCause::kEvicted) continue;
    for (int b = 0; b < kNumEvictionBreakers; ++b) {
      const bool any = std::any_of(shown.begin(), shown.end(), [&](size_t i) {
        return of(results[i]).evicted_tokens_by[b] > 0;
      });
      if (!any) continue;
      const std::string name(EvictionBreakerName(static_cast<EvictionBreaker>(b)));
      row(
          absl::StrCat("<tr data-breaker=\"", name, "\"><td>&emsp;evicted, broken by ", name,
                       "</td>"),
          [b](const MissTotals& t) { return t.evicted_tokens_by[b]; }, true, -1);
    }
  }
  row(
      "<tr class=\"total\"><td>tokens looked up</td>",
      [](const MissTotals& t) { return t.total_tokens(); }, true, 0);
  row(
      "<tr class=\"admissions\"><td>admissions</td>",
      [](const MissTotals& t) { return t.admissions; }, false, 0);
  s += "</tbody></table>\n";
  return s;
}

// Per cause, its share of the first admissions' tokens in the windows of the hit rate over time.
// One chart per cause with a line per policy, rather than one per policy with a line per cause:
// the page compares policies, and a cause's lines on one axis show what a policy recovers and
// when (not_checkpointed growing with a conversation's turns under one policy and flat under the
// other); the policies keep the colours they have in every other chart; and each chart's axis
// fits its own cause, so a cause of a few percent is not flattened under one of sixty. Causes
// that are zero for every policy get no chart, and neither does hit: its share over time is the
// hit rate over time (hit tokens / prompt tokens of the same windows).
std::string MissCausesOverTime(const std::vector<ReplayResult>& results,
                               const std::vector<size_t>& shown, const ArrivalBins& a) {
  std::string out;
  for (int k = 1; k < kNumMissCauses; ++k) {
    const bool any = std::any_of(shown.begin(), shown.end(), [&](size_t i) {
      return results[i].miss_causes.first.tokens[k] > 0;
    });
    if (!any) continue;
    html::ChartSpec c;
    c.id = "miss-over-time-" + CauseId(k);
    c.title = absl::StrCat("Share of tokens missed as ", CauseName(k), " over time");
    c.x_label = "arrival time since the first request (s)";
    c.y_label = absl::StrCat(CauseName(k), " / tokens looked up (%)");
    c.y_min = 0;
    double top = 0;
    for (size_t i : shown) {
      html::Series s = WindowShareSeries(
          results[i], static_cast<int>(i), a,
          [k](const RequestRecord& r) { return r.miss.tokens[k]; },
          [](const RequestRecord& r) { return r.miss.total(); });
      for (const auto& p : s.points) top = std::max(top, p.second);
      c.series.push_back(std::move(s));
    }
    if (top > 80) c.y_max = 100;
    c.note = absl::StrCat(CauseSwatch(k), "<b>", CauseName(k),
                          "</b> tokens / tokens looked up at the first admissions of each "
                          "window's requests (the windows of the hit rate over time).");
    const bool same = std::all_of(c.series.begin(), c.series.end(), [&](const html::Series& s) {
      return s.points == c.series[0].points;
    });
    if (c.series.size() > 1 && same) c.note += " The policies' lines coincide.";
    out += html::LineChart(c);
  }
  return out;
}

// The section: the bars and the tables, what each cause means, and the causes over time. Only
// the results with miss_causes.enabled take part; the caller leaves the section out when none has.
std::string MissCauseSection(const std::vector<ReplayResult>& results, bool deltas,
                             const ArrivalBins& a, int number) {
  std::vector<size_t> shown;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].miss_causes.enabled) shown.push_back(i);
  }
  const bool preempted = std::any_of(shown.begin(), shown.end(), [&](size_t i) {
    return results[i].miss_causes.preempted.admissions > 0;
  });
  // The bars beside what the causes mean, the tables under them (wider than a half-page section),
  // then the causes over time.
  std::string s = absl::StrCat("<h2 id=\"miss-causes\">", number,
                               ". Why tokens missed</h2>\n<div class=\"row\"><section>",
                               MissCauseBars(results, shown, preempted), "</section>\n<section>");
  s += "<p class=\"note\">Every admission's tokens are split into causes that add up to the "
       "tokens it looked up. Each cause takes the tokens past the previous one's end, up to how "
       "far a richer cache would have hit; the definitions and the oracles are in "
       "docs/design.md &sect;7.</p>\n<ul class=\"miss-cause-legend\">";
  for (int c = 0; c < kNumMissCauses; ++c) {
    absl::StrAppend(&s, "<li>", CauseSwatch(c), "<b>", CauseName(c), "</b>: ", kCauseMeanings[c],
                    "</li>");
  }
  s += "</ul></section></div>\n<div class=\"tables\">";
  s += MissCauseTable(results, shown, deltas, &FirstAdmissions, "first", "First admissions");
  if (preempted) {
    s += MissCauseTable(results, shown, deltas, &PreemptedAdmissions, "preempted",
                        "Re-admissions after a preemption");
  }
  s += "</div>\n<p class=\"note\">Shares are of the tokens looked up by the policy's "
       "admissions; the evicted rows split the evicted tokens by the group kind whose own lookup "
       "came back shortest (other_replica: only other replicas had computed them).</p>\n"
       "<div class=\"charts\">";
  s += MissCausesOverTime(results, shown, a);
  s += "</div>\n";
  return s;
}

// ---- capacity sweep ----

std::string CapacityChart(const std::vector<ReplayResult>& results,
                          const HtmlReportOptions& options) {
  html::ChartSpec c;
  c.id = "capacity-sweep";
  c.title = "Hit rate vs KV cache capacity";
  c.x_label = "KV cache (bytes per rank, log scale)";
  c.y_label = "prefix cache hit rate (%)";
  c.log2_x = true;
  c.y_min = 0;
  c.x_tick = [](double v) { return html::Bytes(v); };
  for (size_t i = 0; i < results.size(); ++i) {
    html::Series s;
    s.name = results[i].policy;
    s.color = static_cast<int>(i);
    s.dots = true;
    for (const CapacitySweepPoint& p : options.capacity_sweep) {
      if (p.policy == results[i].policy) {
        s.points.emplace_back(static_cast<double>(p.kv_cache_bytes), 100.0 * p.hit_rate);
      }
    }
    std::sort(s.points.begin(), s.points.end());
    c.series.push_back(std::move(s));
  }
  if (options.configured_kv_cache_bytes > 0) {
    c.markers.push_back({static_cast<double>(options.configured_kv_cache_bytes),
                         "configured " + html::Bytes(options.configured_kv_cache_bytes),
                         7});  // grey
  }
  c.note =
      options.capacity_sweep.size() > results.size()
          ? "One replay of the whole trace per policy and capacity (kv_cache_bytes overridden)."
          : "Only the configured capacity was replayed: pass --capacities a,b,c (bytes, or with "
            "GiB/TiB) to sweep.";
  std::string s = html::LineChart(c);
  if (!options.capacity_sweep.empty()) {
    std::set<int64_t> caps;
    for (const CapacitySweepPoint& p : options.capacity_sweep) caps.insert(p.kv_cache_bytes);
    s += "<table><thead><tr><th>KV cache</th><th>blocks</th>";
    for (const ReplayResult& r : results) {
      absl::StrAppend(&s, "<th>", Escape(r.policy), " hit rate (%)</th><th>", Escape(r.policy),
                      " lost to alignment (% of queries)</th>");
    }
    s += "</tr></thead><tbody>";
    for (int64_t cap : caps) {
      std::string blocks;
      std::string cells;
      for (const ReplayResult& r : results) {
        const CapacitySweepPoint* found = nullptr;
        for (const CapacitySweepPoint& p : options.capacity_sweep) {
          if (p.policy == r.policy && p.kv_cache_bytes == cap) found = &p;
        }
        if (found == nullptr) {
          cells += "<td></td><td></td>";
          continue;
        }
        if (!blocks.empty()) blocks += " / ";
        blocks += Thousands(found->num_blocks);
        absl::StrAppend(&cells, "<td>", Number(100.0 * found->hit_rate, 2), "</td><td>",
                        Number(Pct(found->lost_to_alignment_tokens, found->queries), 2), "</td>");
      }
      absl::StrAppend(&s, "<tr><td>", html::Bytes(static_cast<double>(cap)), "</td><td>", blocks,
                      "</td>", cells, "</tr>");
    }
    s += "</tbody></table>\n";
  }
  return s;
}

// ---- analyze's alignment curve ----

std::string AlignmentCurve(const std::vector<ReplayResult>& results,
                           const HtmlReportOptions& options) {
  html::ChartSpec c;
  c.id = "alignment-curve";
  c.title = "Upper-bound hit rate vs hit alignment (analyze)";
  c.x_label = "hit alignment A (tokens, log scale)";
  c.y_label = "upper-bound hit rate (%)";
  c.log2_x = true;
  c.y_min = 0;
  if (options.analyze != nullptr) {
    html::Series s;
    s.name = "infinite cache, no concurrency";
    s.color = 6;
    s.dots = true;
    for (const AlignmentPoint& p : options.analyze->alignment_curve) {
      s.points.emplace_back(static_cast<double>(p.alignment), 100.0 * p.hit_rate);
    }
    c.series.push_back(std::move(s));
    for (size_t i = 0; i < results.size(); ++i) {
      const int64_t a = results[i].plan.hit_alignment;
      double rate = -1;
      for (const AlignmentPoint& p : options.analyze->alignment_curve) {
        if (p.alignment == a) rate = 100.0 * p.hit_rate;
      }
      c.markers.push_back({static_cast<double>(a),
                           absl::StrCat(results[i].policy, ": A = ", Thousands(a),
                                        rate >= 0 ? absl::StrCat(" → ", Number(rate, 1), "%") : ""),
                           static_cast<int>(i)});
    }
    c.note = absl::StrCat(
        "For each alignment A: the sum over requests of floor(min(shared prefix, L&minus;1) / A) "
        "&middot; A over all prompt tokens, ",
        Thousands(options.analyze->requests),
        " requests streamed in trace order (the ceiling any engine could reach at that A).");
  } else {
    c.note = "analyze did not run" +
             (options.analyze_error.empty() ? "" : ": " + Escape(options.analyze_error));
  }
  return html::LineChart(c);
}

// ---- the fleet ----

// One policy's fleet: the router, the auto-sizing probes and the per-replica table. The tables
// carry data attributes (policy, replica) so that tests and scripts can find the rows.
std::string FleetCard(const ReplayResult& r, int index) {
  const FleetSummary& f = *r.fleet;
  std::string s = absl::StrCat("<div class=\"plan fleet\" data-policy=\"", Escape(r.policy),
                               "\"><h3>", Swatch(index), Escape(r.policy), "</h3>\n<ul><li>",
                               f.replicas, f.replicas == 1 ? " replica" : " replicas",
                               " behind router <span class=\"math\">", Escape(f.router), "</span>");
  if (f.overlap_weight > 0)
    absl::StrAppend(&s, " (overlap weight ", Number(f.overlap_weight, 2), ")");
  if (!f.router_view.empty())
    absl::StrAppend(&s, " on the <span class=\"math\">", Escape(f.router_view),
                    "</span> view of the caches");
  absl::StrAppend(&s, "</li><li>load imbalance ", Number(f.imbalance, 2),
                  " (max / mean requests per replica; 1 is even)</li>");
  if (f.router_fallback_requests > 0) {
    absl::StrAppend(&s, "<li class=\"router-fallback\">router <span class=\"math\">",
                    Escape(f.router), "</span>: ", f.router_fallback_requests, " requests ",
                    Escape(f.router_fallback), "</li>");
  }
  if (f.replicas > 1) {
    absl::StrAppend(&s, "<li class=\"routing-regret\" data-tokens=\"", f.routing_regret_tokens,
                    "\">routing regret ", f.routing_regret_tokens, " tokens (",
                    Number(f.best_replica_hit_tokens > 0
                               ? 100.0 * static_cast<double>(f.routing_regret_tokens) /
                                     static_cast<double>(f.best_replica_hit_tokens)
                               : 0.0,
                           2),
                    "% of the ", f.best_replica_hit_tokens,
                    " tokens the best replicas would have hit), ", f.requests_with_regret,
                    " requests sent past a replica with a longer hit</li>");
  }
  if (f.auto_sized) {
    absl::StrAppend(&s,
                    "<li><span class=\"math\">--replicas auto</span>: the smallest fleet not "
                    "overloaded whose simulated span is at most 1.1 &times; the trace span (",
                    Number(static_cast<double>(f.trace_span_ns) / 1e9, 1),
                    " s) and whose p99 TTFT is within ", Number(f.ttft_slo_ms, 0),
                    " ms; sizes in the order tried:</li>");
  }
  s += "</ul>\n";
  if (f.auto_sized) {
    absl::StrAppend(&s, "<table class=\"fleet-probes\" data-policy=\"", Escape(r.policy),
                    "\"><thead><tr><th>replicas tried</th><th>simulated span (s)</th>"
                    "<th>trace span (s)</th><th>span ratio</th><th>TTFT p99 (ms)</th>"
                    "<th>verdict</th></tr></thead><tbody>");
    const double span_s = static_cast<double>(f.trace_span_ns) / 1e9;
    for (const AutoSizeProbe& p : f.probes) {
      const double sim_s = static_cast<double>(p.sim_time_ns) / 1e9;
      const char* verdict = p.keeps_up     ? "keeps up"
                            : p.thrashed   ? "thrashed"
                            : p.overloaded ? "overloaded"
                                           : "falls behind";
      // A thrashed probe stopped early: its span and TTFT are unknown, not 0.
      absl::StrAppend(
          &s, "<tr data-replicas=\"", p.replicas, "\"",
          p.replicas == f.replicas ? " class=\"chosen\"" : "", "><td>", p.replicas,
          p.replicas == f.replicas ? " (chosen)" : "", "</td><td>",
          p.thrashed ? "&ndash;" : Number(sim_s, 1), "</td><td>", Number(span_s, 1), "</td><td>",
          p.thrashed || span_s <= 0 ? "&ndash;" : Number(sim_s / span_s, 2), "</td><td>",
          p.thrashed ? "&ndash;" : Number(p.ttft_p99_ms, 1), "</td><td class=\"",
          p.keeps_up ? "pos" : "neg", "\">", verdict, "</td></tr>");
    }
    s += "</tbody></table>\n";
  }
  absl::StrAppend(&s, "<table class=\"fleet-replicas\" data-policy=\"", Escape(r.policy),
                  "\"><thead><tr><th>replica</th><th>requests</th><th>finished</th>"
                  "<th>hit rate (%)</th><th>preemptions</th><th>evicted blocks</th>"
                  "<th>KV use (%)</th></tr></thead><tbody>");
  for (size_t i = 0; i < f.per_replica.size(); ++i) {
    const ReplicaSummary& rep = f.per_replica[i];
    absl::StrAppend(&s, "<tr data-replica=\"", i, "\"><td>", i, "</td><td>",
                    Thousands(rep.requests), "</td><td>", Thousands(rep.finished_requests),
                    "</td><td>", Number(100.0 * rep.prefix_cache.hit_rate(), 2), "</td><td>",
                    Thousands(rep.preemptions), "</td><td>", Thousands(rep.evicted_blocks),
                    "</td><td>", Number(100.0 * rep.mean_kv_usage, 1), "</td></tr>");
  }
  s += "</tbody></table></div>\n";
  return s;
}

// Requests and hit rate per replica, one bar per policy.
std::string FleetCharts(const std::vector<ReplayResult>& results) {
  html::ChartSpec load, hits;
  load.id = "fleet-load";
  load.title = "Requests routed to each replica";
  load.y_label = "requests";
  hits.id = "fleet-hit-rate";
  hits.title = "Prefix cache hit rate of each replica";
  hits.y_label = "hit rate, token-weighted (%)";
  hits.y_max = 100;
  for (html::ChartSpec* c : {&load, &hits}) {
    c->x_label = "replica";
    c->y_min = 0;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].fleet) continue;
    html::Series l, h;
    l.name = h.name = results[i].policy;
    l.color = h.color = static_cast<int>(i);
    const auto& per_replica = results[i].fleet->per_replica;
    for (size_t k = 0; k < per_replica.size(); ++k) {
      l.points.emplace_back(static_cast<double>(k), static_cast<double>(per_replica[k].requests));
      h.points.emplace_back(static_cast<double>(k), 100.0 * per_replica[k].prefix_cache.hit_rate());
    }
    load.series.push_back(std::move(l));
    hits.series.push_back(std::move(h));
  }
  load.note =
      "An even router gives bars of one height; load imbalance is the tallest bar over "
      "the mean.";
  hits.note =
      "Each replica's own cache: hit tokens / prompt tokens of the requests it served "
      "(first admission).";
  return html::BarChart(load) + html::BarChart(hits);
}

// Per request, the routing regret: the tokens the best replica would have hit at arrival beyond
// what the chosen one hit. Over time, because a router's view goes stale or fills up as the
// trace goes on (a lossy view's losses add up; an approximate view's bound starts to forget).
std::string RoutingRegretOverTime(const std::vector<ReplayResult>& results) {
  const ArrivalBins a = BinArrivals(results);
  html::ChartSpec c;
  c.id = "routing-regret-over-time";
  c.title = "Routing regret over time";
  c.x_label = "arrival time since the first request (s)";
  c.y_label = "regret / prompt tokens (%)";
  c.y_min = 0;
  if (a.bins > 0) {
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].fleet) continue;
      c.series.push_back(WindowShareSeries(
          results[i], static_cast<int>(i), a,
          [](const RequestRecord& r) { return r.routing_regret_tokens; },
          [](const RequestRecord& r) { return r.prompt_tokens; }));
    }
    c.note = absl::StrCat(
        "Per window of ", Number(a.width_ns / 1e9, 1),
        " s by arrival: the tokens the best replica would have hit at each request's arrival "
        "beyond what the router's choice hit, over the window's prompt tokens. Zero: the router "
        "always found the longest hit.");
  }
  return html::LineChart(c);
}

std::string FleetSection(const std::vector<ReplayResult>& results, int number) {
  std::string s = absl::StrCat("<h2 id=\"fleet\">", number,
                               ". Fleet: replicas behind a router</h2>\n<div class=\"plans\">\n");
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].fleet) s += FleetCard(results[i], static_cast<int>(i));
  }
  s += "</div>\n<div class=\"charts\">";
  s += FleetCharts(results);
  s += RoutingRegretOverTime(results);
  s += "</div>\n";
  return s;
}

}  // namespace

// `prefixsim parity`: simulated against measured hit rate, and the recorded event log against the
// simulated one (agreement over time, the first divergence, per replica and group).
std::string ParitySection(const ParityFigures& p, int number) {
  auto rate = [](double hits, double queries) {
    return queries > 0 ? 100.0 * hits / queries : 0.0;
  };
  const double sim_rate =
      rate(static_cast<double>(p.simulated_hits), static_cast<double>(p.simulated_queries));
  std::string s =
      absl::StrCat("<h2 id=\"parity\">", number,
                   ". Parity with the measured run</h2>\n<table class=\"parity\">"
                   "<thead><tr><th></th><th>prefix-cache hit rate</th><th>hit tokens</th>"
                   "<th>queried tokens</th></tr></thead><tbody>");
  absl::StrAppend(&s, "<tr data-side=\"simulated\"><td>simulated</td><td>", Number(sim_rate, 2),
                  "%</td><td>", Thousands(p.simulated_hits), "</td><td>",
                  Thousands(p.simulated_queries), "</td></tr>");
  if (p.has_measured) {
    const double measured_rate = rate(p.measured_hits, p.measured_queries);
    absl::StrAppend(&s, "<tr data-side=\"measured\"><td>measured (vLLM's counters)</td><td>",
                    Number(measured_rate, 2), "%</td><td>", Thousands(p.measured_hits), "</td><td>",
                    Thousands(p.measured_queries), "</td></tr><tr><td>difference</td><td>",
                    Number(sim_rate - measured_rate, 2), " points</td><td></td><td></td></tr>");
  }
  s += "</tbody></table>\n";
  if (!p.has_events) return s;
  absl::StrAppend(&s, "<p class=\"parity-agreement\" data-steps=\"", p.steps, "\" data-agreeing=\"",
                  p.steps_agreeing, "\">KV events: the cached sets of every group agree after ",
                  Thousands(p.steps_agreeing), " of ", Thousands(p.steps), " steps (",
                  Number(p.steps > 0 ? 100.0 * p.steps_agreeing / p.steps : 100.0, 1), "%).");
  if (p.first_divergent_step >= 0) {
    absl::StrAppend(&s, " <span class=\"first-divergence\">First divergence: step ",
                    p.first_divergent_step, ", replica ", p.first_divergent_replica, ", group ",
                    p.first_divergent_group, ".</span>");
  }
  s += "</p>\n";
  for (const std::string& w : p.cannot_compare) {
    absl::StrAppend(&s, "<p class=\"note cannot-compare\"><b>Cannot compare:</b> ", Escape(w),
                    ".</p>\n");
  }
  s += "<div class=\"charts\">";
  html::ChartSpec chart;
  chart.id = "parity-agreement";
  chart.title = "Replicas whose cached sets agree, by step";
  chart.x_label = "engine step (batch index)";
  chart.y_label = "agreeing (%)";
  chart.y_min = 0;
  chart.y_max = 100;
  html::Series series;
  series.name = "agreeing";
  // At most 200 points: bins of consecutive steps.
  const size_t n = p.replicas_at_step.size();
  const size_t bin = std::max<size_t>(1, (n + 199) / 200);
  for (size_t start = 0; start < n; start += bin) {
    int64_t have = 0, agree = 0;
    for (size_t i = start; i < std::min(n, start + bin); ++i) {
      have += p.replicas_at_step[i];
      agree += p.agreeing_at_step[i];
    }
    if (have > 0) {
      series.points.push_back({static_cast<double>(start),
                               100.0 * static_cast<double>(agree) / static_cast<double>(have)});
    }
  }
  chart.series.push_back(std::move(series));
  chart.note = "Step i is each replica's i-th event batch on both sides.";
  s += html::LineChart(chart);
  s += "</div>\n<table class=\"parity-groups\"><thead><tr><th>replica</th><th>group</th>"
       "<th>stored sim / measured</th><th>removed sim / measured</th>"
       "<th>stored only by sim / measured</th><th>steps agreeing</th></tr></thead><tbody>";
  for (const ParityFigures::Group& g : p.groups) {
    absl::StrAppend(
        &s, "<tr data-replica=\"", g.replica, "\" data-group=\"", g.group, "\"><td>", g.replica,
        "</td><td>", g.group, "</td><td>", Thousands(g.stored_simulated), " / ",
        Thousands(g.stored_measured), "</td><td>", Thousands(g.removed_simulated), " / ",
        Thousands(g.removed_measured), "</td><td>", Thousands(g.stored_simulated_only), " / ",
        Thousands(g.stored_measured_only), "</td><td>", Thousands(g.steps_agreeing), "</td></tr>");
  }
  s += "</tbody></table>\n";
  return s;
}

std::string HtmlReport(const std::vector<ReplayResult>& results, const HtmlReportOptions& options) {
  std::string s =
      absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>",
                   Escape(options.title), "</title>\n<style>", kStyle,
                   "</style></head><body>\n<h1>", Escape(options.title), "</h1>\n");
  if (!options.subtitle.empty())
    absl::StrAppend(&s, "<p class=\"sub\">", Escape(options.subtitle), "</p>\n");
  for (const ReplayResult& r : results) {
    if (!r.partial) continue;
    absl::StrAppend(&s, "<p class=\"sub\"><strong>PARTIAL: interrupted by ",
                    Escape(SignalName(r.interrupt_signal)),
                    "; the figures cover what was simulated until then.</strong></p>\n");
    break;
  }
  for (const ReplayResult& r : results) {
    if (r.overloaded) {
      absl::StrAppend(&s, "<p class=\"sub\"><strong>", Escape(OverloadWarning(r)),
                      "</strong></p>\n");
    }
  }
  if (results.empty()) return s + "<p>No results.</p></body></html>\n";
  const bool deltas = options.deltas && results.size() > 1;
  // Sections are numbered in page order; the miss causes and the fleet appear only when some
  // result has them.
  const bool misses = std::any_of(results.begin(), results.end(),
                                  [](const ReplayResult& r) { return r.miss_causes.enabled; });
  const bool fleet = std::any_of(results.begin(), results.end(),
                                 [](const ReplayResult& r) { return r.fleet.has_value(); });
  const int latency_section = misses ? 5 : 4;
  const int fleet_section = latency_section + 3;
  s += SummaryTable(results, deltas);
  s += "<p class=\"note\">Hit rate: vLLM's token-level definition over non-preempted admissions "
       "(reference &sect;12). <b>Lost to alignment</b>: per admission, the hit a shadow cache "
       "would give (the same computed blocks, published at the finest group block U, never "
       "rounded to S) minus the real hit. <b>Unpublished by the S round-down</b>: computed tokens "
       "of finished requests that the hybrid caching rule kept out of the cache.";
  if (deltas) s += " Deltas are against the first policy.";
  for (const ReplayResult& r : results) {
    if (!r.fleet) continue;
    absl::StrAppend(&s,
                    " Each policy ran a fleet of replicas behind a router; its figures are the "
                    "fleet's totals (per replica in <a href=\"#fleet\">section ",
                    fleet_section, "</a>).");
    break;
  }
  s += "</p>\n";

  s += "<h2>1. KV cache plan</h2>\n<div class=\"plans\">\n";
  for (size_t i = 0; i < results.size(); ++i) s += PlanCard(results[i], static_cast<int>(i));
  s += "</div>\n";

  const ArrivalBins arrival_bins = BinArrivals(results);
  s += "<h2>2. Hit rate over time</h2>\n<div class=\"charts\">";
  s += HitRateOverTime(results, arrival_bins);
  s += "</div>\n<h2>3. Per-request hit and loss</h2>\n<div class=\"charts\">";
  s += Cdf(
      results, "cdf-hit-fraction", "CDF of the per-request hit fraction",
      "hit tokens / prompt tokens (%)",
      [](const RequestRecord& r) {
        return r.prompt_tokens > 0 ? 100.0 * r.hit_tokens / r.prompt_tokens : 0.0;
      },
      false, "At each request's first admission.");
  s += Cdf(
      results, "cdf-lost-to-alignment", "CDF of tokens lost to alignment per request",
      "tokens lost to alignment (tokens)",
      [](const RequestRecord& r) { return static_cast<double>(r.lost_to_alignment_tokens); }, false,
      "Shadow hit minus real hit at the first admission; 0 when A equals the finest block.");
  s += "</div>\n";
  s += BlockSizeCliff(results);
  if (misses) s += MissCauseSection(results, deltas, arrival_bins, 4);
  absl::StrAppend(&s, "<h2>", latency_section, ". Latency</h2>\n<div class=\"charts\">");
  s += Cdf(
      results, "cdf-ttft", "CDF of time to first token", "TTFT (ms)",
      [](const RequestRecord& r) { return (r.first_token_ns - r.arrival_ns) / 1e6; }, true,
      "Simulated: arrival to the end of the step that finishes the prefill.");
  s += Cdf(
      results, "cdf-e2e", "CDF of end-to-end latency", "end-to-end latency (ms)",
      [](const RequestRecord& r) { return (r.finish_ns - r.arrival_ns) / 1e6; }, true,
      "Simulated: arrival to the last output token.");
  absl::StrAppend(&s, "</div>\n<div class=\"row\"><section><h2>", latency_section + 1,
                  ". Capacity</h2>\n");
  s += CapacityChart(results, options);
  absl::StrAppend(&s, "</section>\n<section><h2>", latency_section + 2,
                  ". What the trace allows at each alignment</h2>\n");
  s += AlignmentCurve(results, options);
  s += "</section></div>\n";
  if (fleet) s += FleetSection(results, fleet_section);
  if (options.parity != nullptr)
    s += ParitySection(*options.parity, fleet_section + (fleet ? 1 : 0));
  s += kVerifyScript;
  s += "</body></html>\n";
  return s;
}

std::string ComparisonHtml(const std::vector<ReplayResult>& results, const std::string& title) {
  HtmlReportOptions options;
  options.title = title;
  return HtmlReport(results, options);
}

}  // namespace prefixsim
