#include "sim/plan/plan_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/util/status_macros.h"

namespace prefixsim {

nlohmann::ordered_json StartupCheckToJson(const StartupCheck& check) {
  nlohmann::ordered_json j;
  j["performed"] = check.performed;
  j["ok"] = check.ok;
  j["message"] = check.message;
  j["max_fitting_model_len"] = check.max_fitting_model_len;
  return j;
}

nlohmann::ordered_json KvPlanToJson(const KvPlan& plan) {
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const KvGroup& g : plan.groups) {
    nlohmann::ordered_json j;
    j["kind"] = std::string(LayerKindName(g.kind));
    j["num_layers"] = g.num_layers;
    j["block_size"] = g.block_size;
    j["page_bytes"] = g.page_bytes;
    j["padding_bytes"] = g.padding_bytes;
    j["drafter"] = g.drafter();
    j["num_drafter_layers"] = g.num_drafter_layers;
    j["num_padding_layers"] = g.num_padding_layers;
    j["kernel_block_size"] = g.kernel_block_size;
    if (g.kind == LayerKind::kSlidingWindow) j["sliding_window"] = g.sliding_window;
    if (g.kind == LayerKind::kChunkedLocal) j["attention_chunk_size"] = g.attention_chunk_size;
    j["is_eagle_group"] = g.is_eagle_group;
    if (g.kind == LayerKind::kMamba) j["num_speculative_blocks"] = g.num_speculative_blocks;
    groups.push_back(j);
  }
  nlohmann::ordered_json j;
  j["policy"] = plan.policy;
  j["groups"] = groups;
  j["primary_block_size"] = plan.primary_block_size;
  j["group_size"] = plan.group_size;
  j["scheduler_block_size"] = plan.scheduler_block_size;
  j["hash_block_size"] = plan.hash_block_size;
  j["hit_alignment"] = plan.hit_alignment;
  j["partial_hits"] = plan.partial_hits;
  j["full_allocation_fallback"] = plan.full_allocation_fallback;
  j["num_blocks"] = plan.num_blocks;
  j["bytes_per_block"] = plan.bytes_per_block;
  j["blocks_per_max_len_request"] = plan.blocks_per_max_len_request;
  j["enable_prefix_caching"] = plan.enable_prefix_caching;
  j["prefix_cache_retention_interval"] = plan.retention_interval
                                             ? nlohmann::ordered_json(*plan.retention_interval)
                                             : nlohmann::ordered_json(nullptr);
  j["prefix_cache_retention_interval_source"] = plan.retention_interval_source;
  j["warnings"] = plan.warnings;
  j["startup_check"] = StartupCheckToJson(plan.startup_check);
  return j;
}

std::string FormatKvPlan(const KvPlan& plan) {
  std::string out =
      absl::StrFormat("policy %s   primary block size %d   group size %d   %d KV cache groups\n\n",
                      plan.policy, plan.primary_block_size, plan.group_size, plan.groups.size());
  absl::StrAppendFormat(&out, "  %-15s %6s %7s %5s %8s %7s %7s %12s %12s %7s\n", "kind", "groups",
                        "layers", "pad", "drafter", "block", "kernel", "page_bytes", "padding",
                        "waste");
  // Consecutive groups of one spec print as one row.
  for (size_t i = 0; i < plan.groups.size();) {
    const KvGroup& g = plan.groups[i];
    size_t j = i;
    int layers = 0, padding_layers = 0, drafter_layers = 0;
    while (j < plan.groups.size() && plan.groups[j].kind == g.kind &&
           plan.groups[j].block_size == g.block_size && plan.groups[j].page_bytes == g.page_bytes &&
           plan.groups[j].drafter() == g.drafter()) {
      layers += plan.groups[j].num_layers;
      padding_layers += plan.groups[j].num_padding_layers;
      drafter_layers += plan.groups[j].num_drafter_layers;
      ++j;
    }
    absl::StrAppendFormat(&out, "  %-15s %6d %7d %5d %8d %7d %7d %12d %12d %6.1f%%\n",
                          AbslView(LayerKindName(g.kind)), j - i, layers, padding_layers,
                          drafter_layers, g.block_size, g.kernel_block_size, g.page_bytes,
                          g.padding_bytes, 100.0 * g.padding_bytes / g.page_bytes);
    i = j;
  }
  absl::StrAppendFormat(&out,
                        "\n  scheduler block size S = %d   hash block size H = %d   hit alignment "
                        "A = %d%s\n",
                        plan.scheduler_block_size, plan.hash_block_size, plan.hit_alignment,
                        plan.partial_hits ? " (partial hits)" : "");
  absl::StrAppendFormat(&out,
                        "  num_blocks = %d (incl. the null block)   bytes per block = %d   "
                        "blocks per max_model_len request = %d\n",
                        plan.num_blocks, plan.bytes_per_block, plan.blocks_per_max_len_request);
  int mamba_groups = 0, speculative_blocks = 0;
  for (const KvGroup& g : plan.groups) {
    if (g.kind != LayerKind::kMamba) continue;
    ++mamba_groups;
    speculative_blocks = g.num_speculative_blocks;
  }
  if (speculative_blocks > 0) {
    absl::StrAppendFormat(&out,
                          "  mamba state blocks per request: %d groups x (1 running + %d "
                          "speculative) = %d\n",
                          mamba_groups, speculative_blocks,
                          mamba_groups * (1 + speculative_blocks));
  }
  absl::StrAppendFormat(
      &out, "  prefix_cache_retention_interval = %s (%s)\n",
      plan.retention_interval ? absl::StrCat(*plan.retention_interval) : std::string("dense"),
      plan.retention_interval_source);
  if (!plan.enable_prefix_caching) absl::StrAppend(&out, "  prefix caching disabled\n");
  for (const std::string& w : plan.warnings) absl::StrAppend(&out, "  warning: ", w, "\n");
  return out;
}

}  // namespace prefixsim
