// Hit rate against KV cache capacity: one replay of the whole trace per policy and capacity
// (HtmlReportOptions::capacity_sweep), as a chart with the configured capacity marked and as a
// table.
#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/report/html_sections.h"

namespace prefixsim {
namespace html_report {
namespace {

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
          : "Only the configured capacity was replayed: pass `capacities=a,b,c` (bytes, or with "
            "GiB/TiB) to sweep.";
  return html::LineChart(c);
}

// A row per capacity: the blocks each policy's plan got there, and per policy its hit rate and
// what it lost to alignment (empty cells where that policy did not run at that capacity).
std::string CapacityTable(const std::vector<ReplayResult>& results,
                          const std::vector<CapacitySweepPoint>& sweep) {
  std::set<int64_t> caps;
  for (const CapacitySweepPoint& p : sweep) caps.insert(p.kv_cache_bytes);
  std::string s = "<table><thead><tr><th>KV cache</th><th>blocks</th>";
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
      for (const CapacitySweepPoint& p : sweep) {
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
  return s;
}

}  // namespace

std::string CapacitySection(const PageInputs& page, int number) {
  std::string s = absl::StrCat("<section><h2>", number, ". Capacity</h2>\n");
  s += CapacityChart(page.results, page.options);
  if (!page.options.capacity_sweep.empty()) {
    s += CapacityTable(page.results, page.options.capacity_sweep);
  }
  s += "</section>\n";
  return s;
}

}  // namespace html_report
}  // namespace prefixsim
