// The KV cache plans side by side: each policy's groups, and the arithmetic that gives its
// scheduler block S, hash block H and hit alignment A, and what A costs against the finest block.
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "prefixsim/model.h"
#include "sim/report/html_sections.h"

namespace prefixsim {
namespace html_report {
namespace {

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

// The plan's groups, those of one kind with the same shape collapsed into one row.
std::string GroupTable(const KvPlan& p) {
  std::string s =
      "<table><thead><tr><th>group kind</th><th>groups</th>"
      "<th>layers</th><th>block size (tokens)</th><th>page bytes</th>"
      "<th>padding bytes / page</th><th>drafter</th></tr></thead><tbody>";
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
  s += "</tbody></table>\n";
  return s;
}

// S, H and A with how each follows from the groups' blocks, then what A loses against the finest
// group block U, then the blocks and their padding.
std::string PlanArithmetic(const KvPlan& p) {
  std::string s = "<ul>";
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
                  Number(100.0 * w.waste_fraction, 2), "%)</li></ul>");
  return s;
}

std::string PlanCard(const ReplayResult& r, int index) {
  return absl::StrCat("<div class=\"plan\"><h3>", Swatch(index), Escape(r.policy), "</h3>\n",
                      GroupTable(r.plan), PlanArithmetic(r.plan), "</div>\n");
}

}  // namespace

std::string PlanSection(const PageInputs& page, int number) {
  std::string s = absl::StrCat("<h2>", number, ". KV cache plan</h2>\n<div class=\"plans\">\n");
  for (size_t i = 0; i < page.results.size(); ++i) {
    s += PlanCard(page.results[i], static_cast<int>(i));
  }
  s += "</div>\n";
  return s;
}

}  // namespace html_report
}  // namespace prefixsim
