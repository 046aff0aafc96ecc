// Options shared by the subcommands that build a KV plan: --model, --engine, --policy, and a flag
// for every numeric option of the engine JSON (docs/design.md §4.1).
#ifndef PREFIXSIM_SIM_CLI_COMMON_H_
#define PREFIXSIM_SIM_CLI_COMMON_H_

#include <cstdint>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/model.h"

namespace prefixsim::cli {

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
  bool no_speculative = false;
  // Fleet (replay/compare only; AddFleetOptions adds the flags).
  std::optional<std::string> replicas;  // "N" or "auto"
  std::optional<std::string> router;
  std::optional<double> overlap_weight;
  std::optional<double> ttft_slo_ms;
};

struct ModelEngineOptions {
  std::string model;
  std::string engine;
  EngineOverrides overrides;
};

// A CLI11 validator for a memory-size option: "64GiB", "1.5TiB", "68719476736"
// (sim/util/byte_size.h); it rewrites the value to its byte count, so it goes in ->transform()
// (->check() validates a copy) and the option can be an int64.
CLI::Validator ByteSizeValidator();

// Adds --model, --engine and the override flags to `cmd`.
void AddModelEngineOptions(CLI::App* cmd, ModelEngineOptions* options);

struct ModelAndEngine {
  ModelSpec model;
  EngineConfig engine;
};

// Adds --replicas, --router, --overlap-weight and --ttft-slo-ms to `cmd`.
void AddFleetOptions(CLI::App* cmd, EngineOverrides* overrides);

// Loads the engine (applying overrides) and then the model (HF configs use the engine's
// tensor_parallel_size).
absl::StatusOr<ModelAndEngine> LoadModelAndEngine(const ModelEngineOptions& options);

// Applies overrides to an engine config and re-validates it.
absl::Status ApplyEngineOverrides(const EngineOverrides& overrides, EngineConfig& engine);

// Prints "prefixsim <command>: <message>" to stderr and returns the exit code for `status`.
int ReportError(std::string_view command, const absl::Status& status);

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_COMMON_H_
