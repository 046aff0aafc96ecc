#include "sim/run/option_flags.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "sim/util/option_names.h"

namespace prefixsim::run {

const std::vector<std::pair<std::string, std::string>>& OptionFlags() {
  // Option fields as the library names them: the structs' fields (TraceOptions, WorkloadOptions,
  // EngineOverrides, ReplayOptions, the grid's options) and the engine JSON's paths.
  static const auto* kFlags = new std::vector<std::pair<std::string, std::string>>{
      // TraceOptions
      {"format", "--trace-format"},
      {"trace_block_tokens", "--trace-block-tokens"},
      {"max_requests", "--max-requests"},
      {"start_s", "--trace-start-s"},
      {"end_s", "--trace-end-s"},
      {"time_scale", "--time-scale"},
      {"session_sample_fraction", "--session-sample"},
      // WorkloadOptions (gen-trace)
      {"kind", "--kind"},
      {"arrival", "--arrival"},
      {"requests", "--requests"},
      {"rate_per_s", "--rate"},
      {"max_prompt_tokens", "--max-prompt-tokens"},
      // The model and engine, and their overrides
      {"model", "--model"},
      {"kv_cache_bytes", "--kv-cache-bytes"},
      {"num_gpu_blocks", "--num-gpu-blocks"},
      {"max_num_seqs", "--max-num-seqs"},
      {"kv_cache_dtype", "--kv-cache-dtype"},
      {"mamba_spec_boundary_states", "--mamba-spec-boundary-states"},
      {"replicas", "--replicas"},
      {"router", "--router"},
      {"overlap_weight", "--overlap-weight"},
      {"ttft_slo_ms", "--ttft-slo-ms"},
      {"router_view", "--router-view"},
      {"router.view", "--router-view"},
      {"kv_event_delay_ms", "--kv-event-delay-ms"},
      {"router.event_delay_ms", "--kv-event-delay-ms"},
      {"kv_event_loss", "--kv-event-loss"},
      {"router.event_loss", "--kv-event-loss"},
      {"router_max_blocks", "--router-max-blocks"},
      {"router.max_blocks", "--router-max-blocks"},
      {"router_ttl_s", "--router-ttl-s"},
      {"router.ttl_s", "--router-ttl-s"},
      {"kv_offloading_size", "--kv-offloading-size"},
      {"router_cpu_tier_weight", "--router-cpu-tier-weight"},
      {"router_storage_tier_weight", "--router-storage-tier-weight"},
      {"kv_offload_slot_sizing", "--kv-offload-slot-sizing"},
      {"kv_offload_load_gbps", "--kv-offload-load-gbps"},
      {"kv_offload_store_gbps", "--kv-offload-store-gbps"},
      // ReplayOptions
      {"miss_record_bytes", "--miss-causes-memory-mb"},
      {"max_preemptions_without_finish", "--max-preemptions-without-finish"},
      {"max_steps_without_finish", "--max-steps-without-finish"},
      // The KV plan search (sim/grid/tune.h)
      {"budget", "--budget"},
      {"objective", "--objective"},
      // The report page, the grid, the kernel measurements
      {"capacities", "--capacities"},
      {"shard", "--shard"},
      {"resume", "--resume"},
      {"update", "--update"},
      {"emit_grid", "--emit-grid"},
  };
  return *kFlags;
}

std::optional<std::string> FlagForOption(std::string_view field) {
  static const auto* kByField = [] {
    auto* map = new absl::flat_hash_map<std::string, std::string>();
    for (const auto& [option, flag] : OptionFlags()) map->emplace(option, flag);
    return map;
  }();
  const auto it = kByField->find(absl::string_view(field.data(), field.size()));
  if (it == kByField->end()) return std::nullopt;
  return it->second;
}

std::string SpellAsFlags(std::string_view text) {
  return SpellOptionNames(
      text, [](std::string_view field, std::string_view value) -> std::optional<std::string> {
        std::optional<std::string> flag = FlagForOption(field);
        if (!flag.has_value() || value.empty()) return flag;
        return absl::StrCat(*flag, " ", absl::string_view(value.data(), value.size()));
      });
}

std::string SpellAsKeywords(std::string_view text) {
  return SpellOptionNames(
      text, [](std::string_view field, std::string_view value) -> std::optional<std::string> {
        std::optional<std::string> flag = FlagForOption(field);
        if (!flag.has_value()) return std::nullopt;
        std::string keyword = flag->substr(2);
        std::replace(keyword.begin(), keyword.end(), '-', '_');
        if (value.empty()) return absl::StrCat("`", keyword, "`");
        return absl::StrCat("`", keyword, "=\"", absl::string_view(value.data(), value.size()),
                            "\"`");
      });
}

}  // namespace prefixsim::run
