// The KV cache plan: what vLLM's startup pipeline decides (docs/semantics.md §1–§7).
#ifndef PREFIXSIM_KV_PLAN_H_
#define PREFIXSIM_KV_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/model.h"
#include "prefixsim/policy.h"

namespace prefixsim {

// One KV cache group as vLLM forms them (docs/semantics.md §6.3): layers of one spec sharing block
// ids.
struct KvGroup {
  LayerKind kind = LayerKind::kFullAttention;
  int num_layers = 0;          // real layers in the group
  int num_padding_layers = 0;  // virtual layers added by the group_size rule
  int num_drafter_layers = 0;  // how many of num_layers belong to the drafter
  int block_size = 0;          // tokens per block of this group (B_g)
  int kernel_block_size =
      0;  // block the attention kernel sees after splitting (docs/semantics.md §3.2)
  int64_t page_bytes = 0;            // bytes of one block for one layer, padding included
  int64_t padding_bytes = 0;         // page_bytes minus the real page of one layer
  int64_t sliding_window = 0;        // sliding_window groups
  int64_t attention_chunk_size = 0;  // chunked_local groups
  bool prefix_cacheable = true;
  bool is_eagle_group = false;  // the EAGLE/MTP drop applies to this group (docs/semantics.md §9.4)
  // Mamba groups under speculative decoding: the state blocks a request holds for its draft
  // positions besides its running state (vLLM's MambaSpec.num_speculative_blocks, =
  // num_speculative_tokens; docs/semantics.md §2.3, §10.1). 0 otherwise.
  int num_speculative_blocks = 0;
  bool drafter() const { return num_drafter_layers > 0; }
  // Flagged for its own drafter MLA layers (vLLM's _annotate_eagle_groups), rather than by the
  // coordinator's fallback that flags every group when none is: the offloading connector drops a
  // block only for these (vLLM PR #52771 removed its all-groups fallback).
  bool annotated_eagle_group() const {
    return is_eagle_group && kind == LayerKind::kMla && drafter();
  }
};

// vLLM's startup memory check (docs/semantics.md §1, §2.3, §6.4): one request of max_model_len must
// fit in the KV memory actually available. Performed only when the pool size comes from
// kv_cache_bytes: vLLM applies num_gpu_blocks_override after the check, so a given
// num_gpu_blocks is never refused (requests that cannot fit are skipped as does_not_fit).
struct StartupCheck {
  bool performed = false;  // false with num_gpu_blocks
  bool ok = true;
  std::string message;  // the startup error when !ok: both numbers and the two remedies
  // The largest max_model_len whose request fits (vLLM's "estimated maximum model length");
  // 0 when not performed or when not even one token fits.
  int64_t max_fitting_model_len = 0;
};

// The most KV blocks a pool can have: block ids are 32-bit signed, with room for a sentinel.
// ResolveKvPlan refuses a plan with more.
inline constexpr int64_t kMaxNumBlocks = (int64_t{1} << 31) - 2;

struct KvPlan {
  std::string policy;
  std::vector<KvGroup> groups;
  int primary_block_size = 0;        // cache_config.block_size after §4
  int group_size = 0;                // layers per group (§6.3)
  int64_t scheduler_block_size = 0;  // S = lcm of group block sizes (§7)
  int64_t hash_block_size = 0;       // H = gcd or prefix_match_unit (§7)
  int64_t hit_alignment = 0;         // A = H with partial hits, else S
  bool partial_hits = false;
  bool full_allocation_fallback = false;  // SWA promoted to full attention (§6.1 step 7)
  int64_t num_blocks = 0;                 // including the null block; <= kMaxNumBlocks
  int64_t bytes_per_block = 0;            // max over groups of summed pages
  bool enable_prefix_caching = true;
  // Blocks one request of max_model_len holds at most, summed over groups (docs/semantics.md §2.3,
  // §6.4).
  int64_t blocks_per_max_len_request = 0;
  // Lookahead tokens the speculative method reserves per decode step (docs/semantics.md §11).
  int num_lookahead_tokens = 0;
  int64_t max_model_len = 0;
  StartupCheck startup_check;
  // Align-mode mamba under speculative decoding: cache the state at a block boundary crossed by
  // accepted drafts in a verify step (engine mamba_spec_boundary_states, reference notes §2).
  bool cache_mamba_spec_boundary_states = true;
  // vLLM's prefix_cache_retention_interval as resolved for this plan (docs/semantics.md §10.2):
  // nullopt = dense (None), else tokens (0: the replay boundary and shared-prefix junctions only).
  std::optional<int64_t> retention_interval;
  std::string retention_interval_source;  // where it came from: the engine, or vLLM's default
  bool hybrid() const { return groups.size() > 1; }
  std::vector<std::string> warnings;
};

// Computes the plan. Errors (InvalidArgument) for configurations vLLM refuses at startup while
// forming the groups and granularities. The memory check is not an error here: its result is
// `startup_check`, so that a plan can always be shown; see CheckStartupMemory.
// `policy` names a registered block-size policy, or a policy file (policy.h).
absl::StatusOr<KvPlan> ResolveKvPlan(const ModelSpec& model, const EngineConfig& engine,
                                     std::string_view policy);
absl::StatusOr<KvPlan> ResolveKvPlan(const ModelSpec& model, const EngineConfig& engine,
                                     const BlockSizePolicy& policy);

// The startup memory check as vLLM enforces it before serving: InvalidArgument with
// `startup_check.message` when it was performed and failed, OK otherwise. Replay and
// ReplayWithFleetSizing refuse a plan that fails it.
absl::Status CheckStartupMemory(const KvPlan& plan);

// ResolveKvPlan, then CheckStartupMemory: the plan one replay can serve, as every command that
// replays (and a grid's points) resolves it.
absl::StatusOr<KvPlan> ResolvePlanForServing(const ModelSpec& model, const EngineConfig& engine,
                                             std::string_view policy);

// What a plan whose num_gpu_blocks was given (the check not performed: vLLM applies the override
// after its check, docs/semantics.md §6.4) should be told when one request of max_model_len does
// not fit in it: such requests are skipped as does_not_fit, and the pool may thrash. Empty
// otherwise. The library prints nothing; callers show it.
std::string SmallPoolWarning(const KvPlan& plan);

}  // namespace prefixsim

#endif  // PREFIXSIM_KV_PLAN_H_
