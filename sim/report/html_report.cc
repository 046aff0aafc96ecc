// The comparison page: one self-contained HTML file (inline CSS and SVG, no scripts, no network).
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/report/report.h"

namespace prefixsim {
namespace {

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A horizontal bar chart: one bar per result.
std::string BarChart(const std::string& title, const std::vector<std::string>& labels,
                     const std::vector<double>& values, const char* fmt) {
  const int bar_h = 24, gap = 8, label_w = 120, chart_w = 360;
  const int h = static_cast<int>(labels.size()) * (bar_h + gap) + 30;
  double maxv = 0;
  for (double v : values) maxv = std::max(maxv, v);
  if (maxv <= 0) maxv = 1;
  std::string s = absl::StrFormat(
      "<figure><figcaption>%s</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"%d\" height=\"%d\" role=\"img\">\n",
      Escape(title), label_w + chart_w + 90, h);
  for (size_t i = 0; i < labels.size(); ++i) {
    const int y = 10 + static_cast<int>(i) * (bar_h + gap);
    const int w = static_cast<int>(chart_w * std::max(values[i], 0.0) / maxv);
    absl::StrAppendFormat(&s,
                          "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>"
                          "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"c%d\"/>"
                          "<text x=\"%d\" y=\"%d\">%s</text>\n",
                          label_w - 6, y + 17, Escape(labels[i]), label_w, y, w, bar_h, i % 4,
                          label_w + w + 6, y + 17, absl::StrFormat(fmt, values[i]));
  }
  s += "</svg></figure>\n";
  return s;
}

}  // namespace

std::string ComparisonHtml(const std::vector<ReplayResult>& results, const std::string& title) {
  std::string s = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>", Escape(title),
      "</title>\n<style>\n"
      "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\n"
      "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 10px;"
      "text-align:right}th:first-child,td:first-child{text-align:left}\n"
      "thead{background:#f0f0f0}.pos{color:#1a7f37}.neg{color:#c62828}\n"
      "figure{display:inline-block;margin:1em 2em 1em 0}figcaption{font-weight:600}\n"
      "svg text{font-size:13px}.c0{fill:#4c78a8}.c1{fill:#f58518}.c2{fill:#54a24b}"
      ".c3{fill:#b279a2}\n</style></head><body>\n<h1>",
      Escape(title), "</h1>\n");
  if (results.empty()) return s + "<p>No results.</p></body></html>\n";

  struct Row {
    const char* name;
    double (*get)(const ReplayResult&);
    const char* fmt;
    bool higher_is_better;
  };
  static const Row kRows[] = {
      {"prefix cache hit rate (%)",
       [](const ReplayResult& r) { return 100.0 * r.prefix_cache.hit_rate(); }, "%.2f", true},
      {"hit tokens", [](const ReplayResult& r) { return double(r.prefix_cache.hits); }, "%.0f",
       true},
      {"queries (tokens)", [](const ReplayResult& r) { return double(r.prefix_cache.queries); },
       "%.0f", true},
      {"alignment loss (tokens)",
       [](const ReplayResult& r) { return double(r.alignment_loss_tokens); }, "%.0f", false},
      {"hit alignment A", [](const ReplayResult& r) { return double(r.plan.hit_alignment); },
       "%.0f", false},
      {"scheduler block S",
       [](const ReplayResult& r) { return double(r.plan.scheduler_block_size); }, "%.0f", false},
      {"num_blocks", [](const ReplayResult& r) { return double(r.plan.num_blocks); }, "%.0f", true},
      {"padding bytes per block",
       [](const ReplayResult& r) { return ComputePlanWaste(r.plan).padding_bytes_per_block; },
       "%.0f", false},
      {"memory waste (%)",
       [](const ReplayResult& r) { return 100.0 * ComputePlanWaste(r.plan).waste_fraction; },
       "%.2f", false},
      {"evicted blocks", [](const ReplayResult& r) { return double(r.evicted_blocks); }, "%.0f",
       false},
      {"preemptions", [](const ReplayResult& r) { return double(r.preemptions); }, "%.0f", false},
      {"TTFT mean (ms)", [](const ReplayResult& r) { return r.ttft.mean_ms; }, "%.1f", false},
      {"TTFT p99 (ms)", [](const ReplayResult& r) { return r.ttft.p99_ms; }, "%.1f", false},
      {"TPOT mean (ms)", [](const ReplayResult& r) { return r.tpot.mean_ms; }, "%.2f", false},
      {"E2E mean (ms)", [](const ReplayResult& r) { return r.e2e.mean_ms; }, "%.1f", false},
      {"throughput (req/s)", [](const ReplayResult& r) { return r.requests_per_s; }, "%.3f", true},
  };
  s += "<table><thead><tr><th>metric</th>";
  for (const ReplayResult& r : results) absl::StrAppend(&s, "<th>", Escape(r.policy), "</th>");
  for (size_t i = 1; i < results.size(); ++i) {
    absl::StrAppend(&s, "<th>", Escape(results[i].policy), " &minus; ", Escape(results[0].policy),
                    "</th>");
  }
  s += "</tr></thead><tbody>\n";
  for (const Row& row : kRows) {
    absl::StrAppend(&s, "<tr><td>", row.name, "</td>");
    for (const ReplayResult& r : results) {
      absl::StrAppend(&s, "<td>", absl::StrFormat(row.fmt, row.get(r)), "</td>");
    }
    for (size_t i = 1; i < results.size(); ++i) {
      const double d = row.get(results[i]) - row.get(results[0]);
      const char* cls = d == 0 ? "" : ((d > 0) == row.higher_is_better ? "pos" : "neg");
      absl::StrAppend(&s, "<td class=\"", cls, "\">", d > 0 ? "+" : "", absl::StrFormat(row.fmt, d),
                      "</td>");
    }
    s += "</tr>\n";
  }
  s += "</tbody></table>\n";
  std::vector<std::string> labels;
  std::vector<double> hit, loss, waste;
  for (const ReplayResult& r : results) {
    labels.push_back(r.policy);
    hit.push_back(100.0 * r.prefix_cache.hit_rate());
    loss.push_back(r.prefix_cache.requests > 0
                       ? double(r.alignment_loss_tokens) / double(r.prefix_cache.requests)
                       : 0.0);
    waste.push_back(100.0 * ComputePlanWaste(r.plan).waste_fraction);
  }
  s += BarChart("Prefix cache hit rate (%)", labels, hit, "%.2f");
  s += BarChart("Alignment loss per request (tokens)", labels, loss, "%.0f");
  s += BarChart("Memory waste to padding (%)", labels, waste, "%.2f");
  s += "<p>Hit rate: vLLM's token-level definition over non-preempted admissions. Deltas are "
       "against the first policy.</p>\n</body></html>\n";
  return s;
}

}  // namespace prefixsim
