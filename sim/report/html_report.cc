// The A/B report page (`compare --html`, `replay --html`): one self-contained HTML file with
// inline CSS and SVG (html_charts.h) and a few lines of inline script that only verify the page
// (count each chart's drawn elements into data attributes). No network at view time.
//
// Sections: summary table (deltas against the first policy), the KV plan side by side with the
// LCM arithmetic, hit rate over time, CDFs of per-request hit fraction and of tokens lost to the
// alignment, the block-size cliff (hit fraction by prompt length, each policy's A and S marked),
// TTFT and E2E CDFs, hit rate vs KV cache bytes, `analyze`'s alignment curve with
// each policy's A marked, and for fleet runs the router, the auto-sizing probes and the
// per-replica table with bar charts of load and hit rate.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "prefixsim/analyze.h"
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

// ---- 1. the KV plan ----

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

// ---- 2. hit rate over time ----

std::string HitRateOverTime(const std::vector<ReplayResult>& results) {
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
  html::ChartSpec c;
  c.id = "hit-rate-over-time";
  c.title = "Prefix cache hit rate over time";
  c.x_label = "arrival time since the first request (s)";
  c.y_label = "hit rate, token-weighted (%)";
  c.y_min = 0;
  c.y_max = 100;
  if (n > 0) {
    const int bins = static_cast<int>(std::clamp<size_t>(n / 10, 1, 40));
    const double width = std::max<double>(1.0, static_cast<double>(t1 - t0)) / bins;
    for (size_t i = 0; i < results.size(); ++i) {
      std::vector<int64_t> q(bins, 0), h(bins, 0);
      for (const RequestRecord& rec : results[i].per_request) {
        if (!rec.skipped.empty()) continue;
        const int b =
            std::min(bins - 1, static_cast<int>(static_cast<double>(rec.arrival_ns - t0) / width));
        q[b] += rec.prompt_tokens;
        h[b] += rec.hit_tokens;
      }
      html::Series s;
      s.name = results[i].policy;
      s.color = static_cast<int>(i);
      s.dots = true;
      for (int b = 0; b < bins; ++b) {
        if (q[b] == 0) continue;
        s.points.emplace_back((b + 0.5) * width / 1e9, 100.0 * h[b] / q[b]);
      }
      c.series.push_back(std::move(s));
    }
    c.note = absl::StrCat("Requests grouped into ", bins, " windows of ", Number(width / 1e9, 1),
                          " s by arrival; hit tokens / prompt tokens of each window's requests "
                          "(first admission).");
  }
  return html::LineChart(c);
}

// ---- 3, 4. per-request CDFs ----

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

// ---- 3. the block-size cliff ----

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

// ---- 5. capacity sweep ----

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

// ---- 6. analyze's alignment curve ----

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

// ---- 7. the fleet ----

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
  absl::StrAppend(&s, "</li><li>load imbalance ", Number(f.imbalance, 2),
                  " (max / mean requests per replica; 1 is even)</li>");
  if (f.auto_sized) {
    absl::StrAppend(&s,
                    "<li><span class=\"math\">--replicas auto</span>: the smallest fleet whose "
                    "simulated span is at most 1.1 &times; the trace span (",
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
      const char* verdict = p.keeps_up ? "keeps up" : p.thrashed ? "thrashed" : "falls behind";
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

std::string FleetSection(const std::vector<ReplayResult>& results) {
  std::string s =
      "<h2 id=\"fleet\">7. Fleet: replicas behind a router</h2>\n<div class=\"plans\">\n";
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].fleet) s += FleetCard(results[i], static_cast<int>(i));
  }
  s += "</div>\n<div class=\"charts\">";
  s += FleetCharts(results);
  s += "</div>\n";
  return s;
}

}  // namespace

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
  s += SummaryTable(results, deltas);
  s += "<p class=\"note\">Hit rate: vLLM's token-level definition over non-preempted admissions "
       "(reference &sect;12). <b>Lost to alignment</b>: per admission, the hit a shadow cache "
       "would give (the same computed blocks, published at the finest group block U, never "
       "rounded to S) minus the real hit. <b>Unpublished by the S round-down</b>: computed tokens "
       "of finished requests that the hybrid caching rule kept out of the cache.";
  if (deltas) s += " Deltas are against the first policy.";
  for (const ReplayResult& r : results) {
    if (!r.fleet) continue;
    s += " Each policy ran a fleet of replicas behind a router; its figures are the fleet's "
         "totals (per replica in <a href=\"#fleet\">section 7</a>).";
    break;
  }
  s += "</p>\n";

  s += "<h2>1. KV cache plan</h2>\n<div class=\"plans\">\n";
  for (size_t i = 0; i < results.size(); ++i) s += PlanCard(results[i], static_cast<int>(i));
  s += "</div>\n";

  s += "<h2>2. Hit rate over time</h2>\n<div class=\"charts\">";
  s += HitRateOverTime(results);
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
  s += "<h2>4. Latency</h2>\n<div class=\"charts\">";
  s += Cdf(
      results, "cdf-ttft", "CDF of time to first token", "TTFT (ms)",
      [](const RequestRecord& r) { return (r.first_token_ns - r.arrival_ns) / 1e6; }, true,
      "Simulated: arrival to the end of the step that finishes the prefill.");
  s += Cdf(
      results, "cdf-e2e", "CDF of end-to-end latency", "end-to-end latency (ms)",
      [](const RequestRecord& r) { return (r.finish_ns - r.arrival_ns) / 1e6; }, true,
      "Simulated: arrival to the last output token.");
  s += "</div>\n<div class=\"row\"><section><h2>5. Capacity</h2>\n";
  s += CapacityChart(results, options);
  s += "</section>\n<section><h2>6. What the trace allows at each alignment</h2>\n";
  s += AlignmentCurve(results, options);
  s += "</section></div>\n";
  if (std::any_of(results.begin(), results.end(),
                  [](const ReplayResult& r) { return r.fleet.has_value(); })) {
    s += FleetSection(results);
  }
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
