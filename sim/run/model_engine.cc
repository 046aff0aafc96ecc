#include "sim/run/model_engine.h"

#include <limits>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/fleet/cache_view.h"
#include "sim/fleet/router.h"
#include "sim/util/status_macros.h"

namespace prefixsim::run {

absl::Status ApplyEngineOverrides(const EngineOverrides& o, EngineConfig& engine) {
  if (o.replicas) {
    if (*o.replicas == "auto") {
      engine.fleet.auto_replicas = true;
    } else {
      int64_t n = 0;
      if (!absl::SimpleAtoi(*o.replicas, &n) || n < 1 || n > kMaxReplicas) {
        return absl::InvalidArgumentError(absl::StrCat("`replicas`: '", *o.replicas,
                                                       "' is not an integer in [1, ", kMaxReplicas,
                                                       "] or 'auto'"));
      }
      engine.fleet.replicas = static_cast<int>(n);
      engine.fleet.auto_replicas = false;
    }
  }
  if (o.router) {
    if (const auto unknown = fleet::UnknownRouterMessage(*o.router)) {
      return absl::InvalidArgumentError(absl::StrCat("`router`: ", *unknown));
    }
    engine.fleet.router = *o.router;
  }
  if (o.overlap_weight) {
    if (!(*o.overlap_weight >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("`overlap_weight`: ", *o.overlap_weight, " is negative"));
    }
    engine.fleet.overlap_weight = *o.overlap_weight;
  }
  if (o.router_view) {
    if (const auto unknown = fleet::UnknownCacheViewMessage(*o.router_view)) {
      return absl::InvalidArgumentError(absl::StrCat("`router_view`: ", *unknown));
    }
    engine.fleet.view.kind = *o.router_view;
  }
  if (o.kv_event_delay_ms) {
    if (!(*o.kv_event_delay_ms >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("`kv_event_delay_ms`: ", *o.kv_event_delay_ms, " is negative"));
    }
    engine.fleet.view.event_delay_ms = *o.kv_event_delay_ms;
  }
  if (o.kv_event_loss) {
    if (!(*o.kv_event_loss >= 0 && *o.kv_event_loss <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("`kv_event_loss`: ", *o.kv_event_loss, " is not in [0, 1]"));
    }
    engine.fleet.view.event_loss = *o.kv_event_loss;
  }
  if (o.router_max_blocks) {
    if (*o.router_max_blocks <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "`router_max_blocks`: ", *o.router_max_blocks,
          " must be positive (leave it out for as many blocks as the fleet's KV cache holds)"));
    }
    engine.fleet.view.max_blocks = *o.router_max_blocks;
  }
  if (o.router_ttl_s) {
    if (!(*o.router_ttl_s > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("`router_ttl_s`: ", *o.router_ttl_s,
                       " must be positive (leave it out for a router that never forgets)"));
    }
    engine.fleet.view.ttl_s = *o.router_ttl_s;
  }
  for (auto [value, out, name] :
       {std::tuple{o.router_cpu_tier_weight, &engine.fleet.view.cpu_tier_weight,
                   "router_cpu_tier_weight"},
        std::tuple{o.router_storage_tier_weight, &engine.fleet.view.storage_tier_weight,
                   "router_storage_tier_weight"}}) {
    if (!value) continue;
    if (!(*value >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("`", name, "`: ", *value, " is not a weight (0 or more)"));
    }
    *out = *value;
  }
  if (o.ttft_slo_ms) {
    if (!(*o.ttft_slo_ms > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("`ttft_slo_ms`: ", *o.ttft_slo_ms, " must be positive"));
    }
    engine.fleet.ttft_slo_ms = *o.ttft_slo_ms;
  }
  if (o.block_size) engine.block_size = static_cast<int>(*o.block_size);
  if (o.kv_cache_bytes) {
    engine.kv_cache_bytes = *o.kv_cache_bytes;
    engine.num_gpu_blocks.reset();
  }
  if (o.num_gpu_blocks) engine.num_gpu_blocks = *o.num_gpu_blocks;
  if (o.max_num_batched_tokens) engine.max_num_batched_tokens = *o.max_num_batched_tokens;
  if (o.max_num_seqs) engine.max_num_seqs = *o.max_num_seqs;
  if (o.max_model_len) engine.max_model_len = *o.max_model_len;
  if (o.long_prefill_token_threshold) {
    engine.long_prefill_token_threshold = *o.long_prefill_token_threshold;
  }
  if (o.prefix_match_unit) engine.prefix_match_unit = static_cast<int>(*o.prefix_match_unit);
  if (o.tensor_parallel_size)
    engine.tensor_parallel_size = static_cast<int>(*o.tensor_parallel_size);
  if (o.speculative_method) engine.speculative.method = *o.speculative_method;
  if (o.kv_cache_dtype) {
    if (*o.kv_cache_dtype == "auto") {
      engine.kv_cache_dtype.reset();
    } else {
      engine.kv_cache_dtype = ParseKvDtype(*o.kv_cache_dtype);
      if (!engine.kv_cache_dtype) {
        return absl::InvalidArgumentError(absl::StrCat("`kv_cache_dtype`: unknown dtype '",
                                                       *o.kv_cache_dtype,
                                                       "' (known: ", KvDtypeSpellings(), ")"));
      }
    }
  }
  if (o.mamba_spec_boundary_states) {
    if (*o.mamba_spec_boundary_states == "cached") {
      engine.mamba_spec_boundary_states = MambaSpecBoundaryStates::kCached;
    } else if (*o.mamba_spec_boundary_states == "skipped") {
      engine.mamba_spec_boundary_states = MambaSpecBoundaryStates::kSkipped;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("`mamba_spec_boundary_states`: unknown value '",
                       *o.mamba_spec_boundary_states, "' (known: cached, skipped)"));
    }
  }
  if (o.num_speculative_tokens) {
    engine.speculative.num_speculative_tokens = static_cast<int>(*o.num_speculative_tokens);
    engine.speculative.enabled = *o.num_speculative_tokens > 0;
  }
  if (o.no_speculative) {
    engine.speculative.enabled = false;
    engine.speculative.num_speculative_tokens = 0;
  }
  if (o.enable_prefix_caching) engine.enable_prefix_caching = *o.enable_prefix_caching;
  if (o.enable_chunked_prefill) engine.enable_chunked_prefill = *o.enable_chunked_prefill;
  if (o.prefix_cache_retention_interval) {
    const std::string& v = *o.prefix_cache_retention_interval;
    int64_t tokens = 0;
    if (v == "dense" || v == "none" || v == "None" || v == "null") {
      engine.prefix_cache_retention_interval = {RetentionInterval::Kind::kDense, 0};
    } else if (absl::SimpleAtoi(v, &tokens) && tokens >= 0) {
      engine.prefix_cache_retention_interval = {RetentionInterval::Kind::kTokens, tokens};
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("prefix_cache_retention_interval: '", v,
                       "' is neither a number of tokens (0 or more) nor 'dense'"));
    }
  }
  if (o.scheduler_reserve_full_isl) {
    engine.scheduler_reserve_full_isl = *o.scheduler_reserve_full_isl;
  }
  if (o.disable_eagle_block_drop) {
    engine.speculative.disable_eagle_block_drop = *o.disable_eagle_block_drop;
  }
  KvOffloadConfig& offload = engine.kv_offload;
  if (o.kv_offloading_size) offload.kv_offloading_size_gib = *o.kv_offloading_size;
  if (o.kv_offload_store_threshold) offload.store_threshold = *o.kv_offload_store_threshold;
  if (o.kv_offload_prompt_only) offload.offload_prompt_only = *o.kv_offload_prompt_only;
  if (o.kv_offload_slot_sizing) {
    const auto sizing = ParseOffloadSlotSizing(*o.kv_offload_slot_sizing);
    if (!sizing) {
      return absl::InvalidArgumentError(
          absl::StrCat("`kv_offload_slot_sizing`: '", *o.kv_offload_slot_sizing,
                       "' is not a sizing (known: row_per_key, largest_group)"));
    }
    offload.slot_sizing = *sizing;
  }
  for (auto [value, out, name] :
       {std::tuple{o.kv_offload_load_gbps, &offload.cpu_load_bytes_per_s, "kv_offload_load_gbps"},
        std::tuple{o.kv_offload_store_gbps, &offload.cpu_store_bytes_per_s,
                   "kv_offload_store_gbps"}}) {
    if (!value) continue;
    if (!(*value > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("`", name, "`: ", *value, " is not a positive rate (GB/s)"));
    }
    *out = *value * 1e9;
  }
  absl::Status valid = ValidateEngineConfig(engine);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(engine.source, " with command-line overrides: ", valid.message()));
  }
  if (const auto unknown = fleet::UnknownRouterMessage(engine.fleet.router)) {
    return absl::InvalidArgumentError(absl::StrCat(engine.source, ": field 'router': ", *unknown));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelAndEngine> LoadModelAndEngine(const ModelEngineOptions& options) {
  ModelAndEngine out;
  PREFIXSIM_ASSIGN_OR_RETURN(out.engine, LoadEngine(options.engine));
  PREFIXSIM_RETURN_IF_ERROR(ApplyEngineOverrides(options.overrides, out.engine));
  ModelLoadOptions load;
  load.tensor_parallel_size = out.engine.tensor_parallel_size;
  load.kv_dtype = out.engine.kv_cache_dtype;
  PREFIXSIM_ASSIGN_OR_RETURN(out.model, LoadModel(options.model, load));
  return out;
}

}  // namespace prefixsim::run
