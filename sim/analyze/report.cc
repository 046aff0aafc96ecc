// JSON and text renderings of an AnalyzeResult.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "prefixsim/analyze.h"

namespace prefixsim {

std::string AnalyzeResultToJson(const AnalyzeResult& r) {
  nlohmann::ordered_json j;
  j["requests"] = r.requests;
  j["prompt_tokens"] = r.prompt_tokens;
  j["block_tokens"] = r.block_tokens;
  j["blocks"] = r.blocks;
  j["unique_blocks"] = r.unique_blocks;
  j["unique_full_blocks"] = r.unique_full_blocks;
  j["reused_blocks"] = r.reused_blocks;
  j["reused_block_fraction"] = r.reused_block_fraction;
  j["max_hit_tokens"] = r.max_hit_tokens;
  j["max_hit_rate"] = r.max_hit_rate;

  const ForestStats& f = r.forest;
  nlohmann::ordered_json forest;
  forest["nodes"] = f.nodes;
  forest["edges"] = f.edges;
  forest["roots"] = f.roots;
  forest["leaves"] = f.leaves;
  forest["internal_nodes"] = f.internal_nodes;
  forest["branch_nodes"] = f.branch_nodes;
  forest["max_out_degree"] = f.max_out_degree;
  forest["mean_internal_out_degree"] = f.mean_internal_out_degree;
  forest["max_depth_blocks"] = f.max_depth;
  forest["out_degree_histogram"] = nlohmann::ordered_json::array();
  for (const auto& b : f.out_degree_histogram) {
    forest["out_degree_histogram"].push_back(
        {{"min_degree", b.min_degree}, {"max_degree", b.max_degree}, {"nodes", b.nodes}});
  }
  j["forest"] = forest;

  const SharedPrefixStats& s = r.shared_prefix;
  nlohmann::ordered_json shared;
  shared["requests_with_shared_prefix"] = s.requests_with_shared_prefix;
  shared["shared_tokens"] = s.shared_tokens;
  shared["mean_tokens"] = s.mean_tokens;
  shared["p50_tokens"] = s.p50_tokens;
  shared["p90_tokens"] = s.p90_tokens;
  shared["p99_tokens"] = s.p99_tokens;
  shared["max_tokens"] = s.max_tokens;
  shared["histogram"] = nlohmann::ordered_json::array();
  for (const auto& b : s.histogram) {
    shared["histogram"].push_back(
        {{"min_tokens", b.min_tokens}, {"max_tokens", b.max_tokens}, {"requests", b.requests}});
  }
  j["shared_prefix"] = shared;

  j["alignment_curve"] = nlohmann::ordered_json::array();
  for (const auto& p : r.alignment_curve) {
    j["alignment_curve"].push_back(
        {{"alignment", p.alignment}, {"hit_rate", p.hit_rate}, {"hit_tokens", p.hit_tokens}});
  }
  j["cliff"] = nlohmann::ordered_json::array();
  for (const auto& p : r.cliff) {
    nlohmann::ordered_json c;
    c["alignment"] = p.alignment;
    c["never_hit_short_requests"] = p.never_hit_short_requests;
    c["never_hit_short_prompt_tokens"] = p.never_hit_short_prompt_tokens;
    c["never_hit_short_share"] = p.never_hit_short_share;
    c["never_hit_short_token_share"] = p.never_hit_short_token_share;
    c["bins"] = nlohmann::ordered_json::array();
    for (const auto& b : p.bins) {
      c["bins"].push_back({{"min_tokens", b.min_tokens},
                           {"max_tokens", b.max_tokens},
                           {"requests", b.requests},
                           {"prompt_tokens", b.prompt_tokens},
                           {"hit_tokens", b.hit_tokens},
                           {"hit_fraction", b.hit_fraction}});
    }
    j["cliff"].push_back(std::move(c));
  }
  j["capacity_curve"] = nlohmann::ordered_json::array();
  for (const auto& p : r.capacity_curve) {
    j["capacity_curve"].push_back({{"capacity_blocks", p.capacity_blocks},
                                   {"lru_hit_rate", p.lru_hit_rate},
                                   {"optimal_hit_rate", p.optimal_hit_rate},
                                   {"lru_hit_tokens", p.lru_hit_tokens},
                                   {"optimal_hit_tokens", p.optimal_hit_tokens}});
  }
  return j.dump(2);
}

std::string FormatAnalyzeResult(const AnalyzeResult& r) {
  std::string out;
  absl::StrAppendFormat(&out, "requests              %d\n", r.requests);
  absl::StrAppendFormat(&out, "prompt tokens         %d\n", r.prompt_tokens);
  absl::StrAppendFormat(&out, "block tokens          %d\n", r.block_tokens);
  absl::StrAppendFormat(&out, "blocks                %d (unique %d, unique full %d)\n", r.blocks,
                        r.unique_blocks, r.unique_full_blocks);
  absl::StrAppendFormat(&out, "reused block fraction %.4f (%d blocks seen before)\n",
                        r.reused_block_fraction, r.reused_blocks);
  absl::StrAppendFormat(&out, "max hit rate          %.4f (token-exact, L-1 cap)\n",
                        r.max_hit_rate);

  const ForestStats& f = r.forest;
  absl::StrAppendFormat(&out,
                        "\nprefix forest: %d nodes, %d trees, %d leaves, %d internal, %d branch "
                        "points, max depth %d blocks, max out-degree %d, mean internal "
                        "out-degree %.3f\n",
                        f.nodes, f.roots, f.leaves, f.internal_nodes, f.branch_nodes, f.max_depth,
                        f.max_out_degree, f.mean_internal_out_degree);
  absl::StrAppend(&out, "  out-degree of internal nodes:\n");
  for (const auto& b : f.out_degree_histogram) {
    if (b.nodes == 0) continue;
    absl::StrAppendFormat(&out, "    %6d..%-6d %d\n", b.min_degree, b.max_degree, b.nodes);
  }

  const SharedPrefixStats& s = r.shared_prefix;
  absl::StrAppendFormat(&out,
                        "\nshared prefix per request (tokens): %d of %d requests share one; mean "
                        "%.1f, p50 %d, p90 %d, p99 %d, max %d\n",
                        s.requests_with_shared_prefix, r.requests, s.mean_tokens, s.p50_tokens,
                        s.p90_tokens, s.p99_tokens, s.max_tokens);
  for (const auto& b : s.histogram) {
    if (b.requests == 0) continue;
    absl::StrAppendFormat(&out, "    %7d..%-7d %d\n", b.min_tokens, b.max_tokens, b.requests);
  }

  // never_hit: the block-size cliff, prompts of at most A tokens, whose hit
  // floor((L-1) / A) * A is 0 (docs/semantics.md §9.3); shares of requests and of prompt tokens.
  absl::StrAppend(&out,
                  "\nupper-bound hit rate by hit alignment (infinite cache, L-1 cap); never hit: "
                  "prompts of at most A tokens:\n");
  absl::StrAppend(&out,
                  "  alignment  hit_rate  never_hit_requests  never_hit_share  "
                  "never_hit_token_share\n");
  for (size_t i = 0; i < r.alignment_curve.size(); ++i) {
    const AlignmentPoint& p = r.alignment_curve[i];
    absl::StrAppendFormat(&out, "  %9d  %.4f", p.alignment, p.hit_rate);
    if (i < r.cliff.size() && r.cliff[i].alignment == p.alignment) {
      const CliffPoint& c = r.cliff[i];
      absl::StrAppendFormat(&out, "    %18d  %15.4f  %21.4f", c.never_hit_short_requests,
                            c.never_hit_short_share, c.never_hit_short_token_share);
    }
    out += "\n";
  }

  if (!r.capacity_curve.empty()) {
    absl::StrAppendFormat(&out, "\nhit rate by cache capacity (blocks of %d tokens):\n",
                          r.block_tokens);
    absl::StrAppend(&out, "   capacity     lru  optimal\n");
    for (const auto& p : r.capacity_curve) {
      absl::StrAppendFormat(&out, "  %9d  %.4f  %.4f\n", p.capacity_blocks, p.lru_hit_rate,
                            p.optimal_hit_rate);
    }
  }
  return out;
}

}  // namespace prefixsim
