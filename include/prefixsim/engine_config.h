// The engine configuration: vLLM's knobs under vLLM's names (docs/design.md §4.3).
#ifndef PREFIXSIM_ENGINE_CONFIG_H_
#define PREFIXSIM_ENGINE_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/model.h"

namespace prefixsim {

// One item of a backend's get_supported_kernel_block_sizes(): an exact size, or any multiple of
// `value` (docs/semantics.md §3.1).
struct KernelBlockSize {
  int value = 16;
  bool multiple_of = false;
  bool Accepts(int64_t block_size) const {
    return multiple_of ? block_size % value == 0 : block_size == value;
  }
};

struct AttentionBackend {
  std::string name;
  std::vector<KernelBlockSize> kernel_block_sizes;
  // Block size the platform picks for this backend when the user sets none (docs/semantics.md §4).
  int preferred_block_size = 16;
};

// The built-in backend table (docs/semantics.md §3.1, docs/design.md §4.3). NotFound for an unknown
// name.
absl::StatusOr<AttentionBackend> LookupBackend(std::string_view name);
std::vector<std::string> BuiltinBackendNames();

enum class MambaCacheMode { kNone, kAlign, kAll };
std::string_view MambaCacheModeName(MambaCacheMode mode);

// Align mode under speculative decoding: whether the state at a block boundary that accepted
// drafts cross inside a verify step is cached (vLLM's postprocess_mamba copies it into the
// boundary's block; docs/reference-notes.md §2) or skipped (no state cached in such steps).
enum class MambaSpecBoundaryStates { kCached, kSkipped };
std::string_view MambaSpecBoundaryStatesName(MambaSpecBoundaryStates mode);

// How the number of accepted draft tokens per verification step is drawn.
struct AcceptanceConfig {
  std::string model = "geometric";  // geometric | per_position | empirical | trace
  std::vector<double> rates;        // geometric: one rate; per_position: one per draft position
  std::vector<double> histogram;    // empirical: weight of accepting 0..k drafts
};

struct SpeculativeConfig {
  bool enabled = false;
  std::string method = "dspark";  // eagle, eagle3, mtp, dspark, draft_model, ngram, suffix, medusa
  int num_speculative_tokens = 0;
  // vLLM's SpeculativeConfig.disable_eagle_block_drop: the EAGLE-family methods (eagle, eagle3,
  // mtp, dspark) drop the last matched unit of a prefix hit (docs/semantics.md §9.4) unless set.
  bool disable_eagle_block_drop = false;
  AcceptanceConfig acceptance;

  // Lookahead slots reserved per decode step (docs/semantics.md §11): k for EAGLE/MTP/DSpark/draft
  // model methods, 0 for ngram/suffix/medusa.
  int LookaheadTokens() const;
};

// vLLM's CacheConfig.prefix_cache_retention_interval (docs/semantics.md §10.2): which prefix-cache
// checkpoints sliding-window and mamba groups keep. Unset: vLLM's resolution (dense for a hybrid
// model with an EAGLE-family drafter, 0 otherwise); dense (JSON null): every reachable block;
// N tokens: the prompt's replay boundary and shared-prefix junctions, and with N > 0 the end of
// every N-token segment.
struct RetentionInterval {
  enum class Kind { kUnset, kDense, kTokens };
  Kind kind = Kind::kUnset;
  int64_t tokens = 0;  // kTokens
};

struct CostModelConfig {
  std::string kind = "analytic";  // analytic | table
  std::string gpu = "h200";       // analytic presets: h100, h200
  std::string table_path;         // table: measured times (CSV)
};

// A storage tier behind the CPU tier: one entry of vLLM's `secondary_tiers` (its
// TieringOffloadingSpec; docs/semantics.md §16). Blocks reach it only through the CPU tier.
struct SecondaryTierConfig {
  std::string type = "fs";  // fs | obj | p2p; the medium its reports and events name (FS, ...)
  int64_t capacity_bytes = 0;
  // Bytes per second (decimal GB/s in the JSON) from the tier into CPU memory and back; vLLM has
  // no such knob (the hardware decides), so these are prefixsim's.
  double read_bytes_per_s = 5e9;
  double write_bytes_per_s = 2e9;
  // One tier for the whole fleet (a shared file system or object store: one copy, its bandwidth
  // shared by the replicas) instead of one per replica.
  bool shared = false;
};

// How one CPU slot is sized (docs/semantics.md §16.2): vLLM gives every offload key, which names
// one (block hash, group), a slot as large as one block of every group together (vLLM issue
// #56871, still so on main@9d14fd3), or, with the fix proposed in PR #56953, as large as the
// largest group's block.
enum class OffloadSlotSizing { kRowPerKey, kLargestGroup };
std::string_view OffloadSlotSizingName(OffloadSlotSizing sizing);
std::optional<OffloadSlotSizing> ParseOffloadSlotSizing(std::string_view name);

// vLLM's native KV offloading (`kv_offloading_size` turns on the OffloadingConnector with a CPU
// tier; `kv_transfer_config.kv_connector_extra_config` holds its knobs). docs/semantics.md §16.
inline constexpr int kMaxSecondaryTiers = 3;
struct KvOffloadConfig {
  double kv_offloading_size_gib = 0;  // CacheConfig.kv_offloading_size; 0 = no offloading
  int64_t store_threshold = 0;        // >= 2: store a block only after that many lookups
  bool offload_prompt_only = true;
  std::vector<SecondaryTierConfig> secondary_tiers;  // consulted in order after the CPU tier
  // prefixsim's own: the GPU <-> CPU link (PCIe) in bytes per second each way, and the slot sizing.
  double cpu_load_bytes_per_s = 25e9;
  double cpu_store_bytes_per_s = 25e9;
  OffloadSlotSizing slot_sizing = OffloadSlotSizing::kRowPerKey;
  bool enabled() const { return kv_offloading_size_gib > 0; }
};

// A fleet of identical engine replicas behind a router (docs/design.md §2 "Fleet"). One replica is
// the plain single-engine replay.
inline constexpr int kMaxReplicas = 4096;

// How a KV-aware router sees the replicas' caches: "" is the router's
// own default (kv_aware: exact; kv_aware_unaligned: attention_only).
struct RouterViewConfig {
  std::string kind;           // exact | delayed | lossy | attention_only | approximate
  double event_delay_ms = 0;  // delayed: how late the router applies each event
  double event_loss = 0;      // lossy: the fraction of events the router never receives
  int64_t max_blocks =
      0;             // approximate: the most prompt blocks it remembers (0: unset, the fleet's)
  double ttl_s = 0;  // approximate: forget blocks not routed for this long (0: unset, never)
  // With offload tiers: what a token a replica holds in a tier is worth beside one on its GPU
  // (1), as llm-d's tier-aware prefix scorer weighs them (its defaults); 0 ignores the tier.
  double cpu_tier_weight = 0.8;
  double storage_tier_weight = 0.3;
};

struct FleetConfig {
  int replicas = 1;                    // engine replicas; >= 1
  bool auto_replicas = false;          // search the smallest fleet that keeps up (replicas ignored)
  std::string router = "round_robin";  // a registered router's name
  double overlap_weight = 1.0;         // kv_aware routers: weight of the prompt tokens to compute
  RouterViewConfig view;               // kv_aware routers: how they see the caches
  double ttft_slo_ms = 2000;           // auto_replicas: p99 TTFT the fleet must hold
};

struct EngineConfig {
  // Primary block size; unset means the backend's preference, raised by mamba alignment.
  std::optional<int> block_size;
  // Attention backend per layer kind. Kinds not listed use "default_backend".
  std::map<LayerKind, AttentionBackend> backends;
  AttentionBackend default_backend;  // FLASH_ATTN unless the JSON says otherwise
  std::optional<int64_t> kv_cache_bytes;
  std::optional<int64_t> num_gpu_blocks;
  int64_t max_num_batched_tokens = 8192;
  int64_t max_num_seqs = 256;
  int64_t max_model_len = 131072;
  bool enable_prefix_caching = true;
  bool enable_chunked_prefill = true;
  // vLLM's SchedulerConfig.scheduler_reserve_full_isl: a waiting request is admitted only when
  // blocks for its whole sequence fit, not just its first chunk (docs/semantics.md §11).
  bool scheduler_reserve_full_isl = true;
  int64_t long_prefill_token_threshold = 0;
  std::optional<int> prefix_match_unit;
  MambaCacheMode mamba_cache_mode = MambaCacheMode::kAlign;
  RetentionInterval prefix_cache_retention_interval;
  MambaSpecBoundaryStates mamba_spec_boundary_states = MambaSpecBoundaryStates::kCached;
  // KV cache dtype for models that do not give one per layer (HuggingFace configs); native model
  // JSON carries its dtype per layer. Unset: the checkpoint's (bf16 for most).
  std::optional<KvDtype> kv_cache_dtype;
  int tensor_parallel_size = 1;
  int decode_context_parallel_size = 1;
  // Shared padded page for skip-quant layers (docs/semantics.md §5); unset in the common case.
  std::optional<int64_t> skip_page_size_padded;
  bool disable_hybrid_kv_cache_manager = false;
  SpeculativeConfig speculative;
  KvOffloadConfig kv_offload;
  CostModelConfig cost_model;
  FleetConfig fleet;
  std::string source;  // where it was read from (for messages)

  // The backend that serves layers of `kind`.
  const AttentionBackend& BackendFor(LayerKind kind) const;
};

// Parses an engine JSON. `source` names the file in error messages.
absl::StatusOr<EngineConfig> ParseEngineJson(std::string_view text, std::string_view source);
// Cross-field checks (memory given, speculative and acceptance settings consistent); also
// re-run after command-line overrides.
absl::Status ValidateEngineConfig(const EngineConfig& engine);
// Reads an engine JSON file, or the name of a preset in configs/engines/ (without ".json").
absl::StatusOr<EngineConfig> LoadEngine(std::string_view path_or_preset);

}  // namespace prefixsim

#endif  // PREFIXSIM_ENGINE_CONFIG_H_
