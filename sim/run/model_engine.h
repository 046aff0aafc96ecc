// Loading a model and an engine the way the commands and the grid's points do: the engine JSON
// (or preset), command-line style overrides of its options (docs/design.md §4.1), then the model
// (HF configs use the engine's tensor_parallel_size).
#ifndef PREFIXSIM_SIM_RUN_MODEL_ENGINE_H_
#define PREFIXSIM_SIM_RUN_MODEL_ENGINE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/model.h"

namespace prefixsim::run {

struct EngineOverrides {
  std::optional<int64_t> block_size;
  std::optional<int64_t> kv_cache_bytes;
  std::optional<int64_t> num_gpu_blocks;
  std::optional<int64_t> max_num_batched_tokens;
  std::optional<int64_t> max_num_seqs;
  std::optional<int64_t> max_model_len;
  std::optional<int64_t> long_prefill_token_threshold;
  std::optional<int64_t> prefix_match_unit;
  std::optional<int64_t> tensor_parallel_size;
  std::optional<int64_t> num_speculative_tokens;
  std::optional<std::string> speculative_method;
  std::optional<std::string> kv_cache_dtype;
  std::optional<std::string> mamba_spec_boundary_states;
  std::optional<bool> enable_prefix_caching;
  std::optional<bool> enable_chunked_prefill;
  std::optional<bool> disable_eagle_block_drop;
  std::optional<bool> scheduler_reserve_full_isl;
  // An integer number of tokens, or "dense" (vLLM's None).
  std::optional<std::string> prefix_cache_retention_interval;
  // Offload tiers (KvOffloadConfig): the CPU tier's GiB, store_threshold, offload_prompt_only,
  // the slot sizing and the GPU <-> CPU link's GB/s each way.
  std::optional<double> kv_offloading_size;
  std::optional<int64_t> kv_offload_store_threshold;
  std::optional<bool> kv_offload_prompt_only;
  std::optional<std::string> kv_offload_slot_sizing;
  std::optional<double> kv_offload_load_gbps;
  std::optional<double> kv_offload_store_gbps;
  bool no_speculative = false;
  // Fleet (replay/compare and grid points; the CLI's AddFleetOptions adds the flags).
  std::optional<std::string> replicas;  // "N" or "auto"
  std::optional<std::string> router;
  std::optional<double> overlap_weight;
  std::optional<double> ttft_slo_ms;
  std::optional<std::string> router_view;
  std::optional<double> kv_event_delay_ms;
  std::optional<double> kv_event_loss;
  std::optional<int64_t> router_max_blocks;
  std::optional<double> router_ttl_s;
  std::optional<double> router_cpu_tier_weight;
  std::optional<double> router_storage_tier_weight;
};

struct ModelEngineOptions {
  std::string model;
  std::string engine;
  EngineOverrides overrides;
};

struct ModelAndEngine {
  ModelSpec model;
  EngineConfig engine;
};

// Loads the engine (applying overrides) and then the model (HF configs use the engine's
// tensor_parallel_size).
absl::StatusOr<ModelAndEngine> LoadModelAndEngine(const ModelEngineOptions& options);

// Applies overrides to an engine config and re-validates it. Errors name the override's field
// ("`replicas`: ...", sim/util/option_names.h).
absl::Status ApplyEngineOverrides(const EngineOverrides& overrides, EngineConfig& engine);

}  // namespace prefixsim::run

#endif  // PREFIXSIM_SIM_RUN_MODEL_ENGINE_H_
