// The offload tiers (docs/semantics.md §16): per policy, each tier's share of the hit, its traffic
// and the writes that never paid off; and each tier's share of the prompt tokens over time.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/report/html_sections.h"

namespace prefixsim {
namespace html_report {
namespace {

// Each tier's table row: what it served, held and wrote.
std::string TierTable(const ReplayResult& r, int color) {
  const int64_t queries = r.prefix_cache.queries - r.prefix_cache.preempted_queries;
  std::string s = absl::StrCat(
      "<table class=\"offload\" data-policy=\"", Escape(r.policy), "\"><caption>", Swatch(color),
      Escape(r.policy),
      "</caption><thead><tr><th>tier</th><th>capacity</th><th>hit tokens</th><th>of tokens "
      "looked up (%)</th><th>stored blocks</th><th>loaded blocks</th><th>stored, never "
      "loaded</th><th>evicted</th><th>refused stores</th><th>peak use "
      "(%)</th></tr></thead><tbody>");
  absl::StrAppend(&s, "<tr data-tier=\"GPU\"><td>GPU</td><td></td><td>",
                  Thousands(r.offload.gpu_hit_tokens), "</td><td>",
                  Number(Pct(r.offload.gpu_hit_tokens, queries), 2),
                  "</td><td></td><td></td><td></td><td></td><td></td><td></td></tr>");
  for (const OffloadTierStats& t : r.offload.tiers) {
    absl::StrAppend(&s, "<tr data-tier=\"", Escape(t.medium), "\"><td>", Escape(t.medium),
                    "</td><td>", html::Bytes(static_cast<double>(t.capacity_bytes)), " (",
                    Thousands(t.capacity_blocks), " blocks)</td><td>", Thousands(t.hit_tokens),
                    "</td><td>", Number(Pct(t.hit_tokens, queries), 2), "</td><td>",
                    Thousands(t.stored_blocks), "</td><td>", Thousands(t.loaded_blocks),
                    "</td><td>", Thousands(t.never_loaded_blocks), "</td><td>",
                    Thousands(t.evicted_blocks), "</td><td>", Thousands(t.store_failures),
                    "</td><td>", Number(Pct(t.peak_used_bytes, t.capacity_bytes), 1), "</td></tr>");
  }
  absl::StrAppend(&s, "</tbody></table>\n");
  return s;
}

// One policy's chart: each tier's hit tokens / prompt tokens over the arrival windows.
std::string TiersOverTime(const ReplayResult& r, int color, const ArrivalBins& a) {
  html::ChartSpec c;
  c.id = absl::StrCat("offload-over-time-", color);
  c.title = absl::StrCat("Hit by tier over time: ", r.policy);
  c.x_label = "arrival time since the first request (s)";
  c.y_label = "hit tokens / prompt tokens (%)";
  c.y_min = 0;
  auto prompt = [](const RequestRecord& rec) { return rec.prompt_tokens; };
  html::Series gpu = WindowShareSeries(
      r, 0, a, [](const RequestRecord& rec) { return rec.gpu_hit_tokens; }, prompt);
  gpu.name = "GPU";
  c.series.push_back(std::move(gpu));
  for (size_t t = 0; t < r.offload.tiers.size(); ++t) {
    html::Series s = WindowShareSeries(
        r, static_cast<int>(t) + 1, a,
        [t](const RequestRecord& rec) { return rec.tier_hit_tokens[t]; }, prompt);
    s.name = r.offload.tiers[t].medium;
    c.series.push_back(std::move(s));
  }
  c.note =
      "Each tier's share of the prompt tokens of each window's requests, at their first "
      "admission (the windows of the hit rate over time).";
  return html::LineChart(c);
}

}  // namespace

std::string OffloadSection(const PageInputs& page, int number) {
  std::string s = absl::StrCat(
      "<h2 id=\"offload\">", number,
      ". Offload tiers</h2>\n<p class=\"note\">Hits by where they came from: the GPU pool, or a "
      "tier behind it (vLLM's OffloadingConnector, docs/semantics.md &sect;16), loaded while the "
      "request waited. \"Stored, never loaded\" counts writes that never paid off: blocks a tier "
      "stored and evicted, or still holds, without a load ever reading them.</p>\n<div "
      "class=\"tables\">");
  for (size_t i = 0; i < page.results.size(); ++i) {
    if (page.results[i].offload.enabled) s += TierTable(page.results[i], static_cast<int>(i));
  }
  s += "</div>\n<div class=\"charts\">";
  for (size_t i = 0; i < page.results.size(); ++i) {
    const ReplayResult& r = page.results[i];
    if (r.offload.enabled && !r.per_request.empty()) {
      s += TiersOverTime(r, static_cast<int>(i), page.arrival_bins);
    }
  }
  s += "</div>\n";
  return s;
}

}  // namespace html_report
}  // namespace prefixsim
