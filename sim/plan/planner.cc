// The KV planner: ModelSpec + EngineConfig + block-size policy -> KvPlan, following vLLM's startup
// pipeline (docs/semantics.md §1): primary block size (§4), per-layer specs with the SWA policy
// (§5), grouping (§6), memory (§6.4) and the scheduler/hash granularities (§7). Pure: no engine
// state.
#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/policy.h"
#include "sim/plan/policies/policies.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One concrete layer's KV cache spec.
struct LayerKv {
  LayerKind kind;
  bool drafter;
  int64_t per_token_bytes = 0;  // attention only
  int64_t state_bytes = 0;      // mamba only
  int64_t block_size = 0;
  int64_t real_page = 0;  // page without padding
  int64_t page = 0;       // page_size_bytes (padding included)
  int64_t sliding_window = 0;
  int64_t attention_chunk_size = 0;

  int64_t RealPageAt(int64_t block) const {
    return kind == LayerKind::kMamba ? state_bytes : block * per_token_bytes;
  }
  // The identity vLLM buckets layers by (spec equality, docs/semantics.md §6.3).
  auto SpecKey() const {
    return std::make_tuple(static_cast<int>(kind), block_size, page, real_page, sliding_window,
                           attention_chunk_size, per_token_bytes);
  }
};

bool IsFullFamily(LayerKind kind) {
  return kind == LayerKind::kFullAttention || kind == LayerKind::kMla;
}

// docs/semantics.md §6.1 step 4: UniformTypeKVCacheSpecs.from_specs.
bool IsUniformType(const std::vector<LayerKv>& layers) {
  const LayerKv& first = layers.front();
  for (const LayerKv& l : layers) {
    if (l.block_size != first.block_size) return false;
    if (IsFullFamily(first.kind)) {
      if (!IsFullFamily(l.kind)) return false;
    } else if (l.kind != first.kind) {
      return false;
    } else if (l.kind == LayerKind::kSlidingWindow && l.sliding_window != first.sliding_window) {
      return false;
    } else if (l.kind == LayerKind::kChunkedLocal &&
               l.attention_chunk_size != first.attention_chunk_size) {
      return false;
    } else if (l.kind == LayerKind::kMamba && l.page != first.page) {
      return false;
    }
  }
  return true;
}

// docs/semantics.md §3.2 select_common_block_size: the kernel block a group block is split into.
absl::StatusOr<int> SelectKernelBlockSize(const AttentionBackend& backend, int64_t block_size,
                                          bool padded) {
  for (const auto& s : backend.kernel_block_sizes) {
    if (s.Accepts(block_size)) return static_cast<int>(block_size);
  }
  if (padded) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend ", backend.name, " cannot run block size ", block_size,
                     " unsplit, and padded KV pages do not support kernel block splitting"));
  }
  std::vector<int> ints;
  for (const auto& s : backend.kernel_block_sizes) {
    if (!s.multiple_of) ints.push_back(s.value);
  }
  std::sort(ints.rbegin(), ints.rend());
  for (int size : ints) {
    if (block_size % size == 0) return size;
  }
  return absl::InvalidArgumentError(absl::StrCat("no common block size: backend ", backend.name,
                                                 " has no kernel block that divides ", block_size));
}

// docs/semantics.md §2.3: pages one request of max_model_len holds in a group of this spec.
int64_t MaxPagesPerRequest(const KvGroup& group, const EngineConfig& engine,
                           int64_t lookahead_tokens) {
  const int64_t m = engine.max_model_len;
  const int64_t t = engine.max_num_batched_tokens + lookahead_tokens;
  const int64_t b = group.block_size;
  switch (group.kind) {
    case LayerKind::kFullAttention:
    case LayerKind::kMla:
      return CeilDiv(m, b);
    case LayerKind::kSlidingWindow:
      return CeilDiv(std::min(group.sliding_window - 1 + t, m), b) + 1;
    case LayerKind::kChunkedLocal:
      return CeilDiv(std::min(group.attention_chunk_size + t, m), b);
    case LayerKind::kMamba:
      switch (engine.mamba_cache_mode) {
        case MambaCacheMode::kNone:
          return 1 + group.num_speculative_blocks;
        case MambaCacheMode::kAlign:
          return 2 + group.num_speculative_blocks;
        case MambaCacheMode::kAll:
          return CeilDiv(m, b) + group.num_speculative_blocks;
      }
  }
  return CeilDiv(m, b);
}

// docs/semantics.md §9.4 / §6.3: whether the EAGLE/MTP last-unit drop applies, as vLLM's
// SpeculativeConfig.use_eagle_block_drop(): use_eagle() (the methods that draft from the target's
// hidden states: eagle, eagle3, mtp, dspark) and not disable_eagle_block_drop.
bool UsesEagleBlockDrop(const SpeculativeConfig& spec) {
  if (!spec.enabled || spec.disable_eagle_block_drop) return false;
  return spec.method == "eagle" || spec.method == "eagle3" || spec.method == "mtp" ||
         spec.method == "dspark";
}

// What every stage reads, and the error it returns: "<model> with <engine>: <message>".
struct PlanInputs {
  const ModelSpec& model;
  const EngineConfig& engine;
  const BlockSizePolicy& policy;

  absl::Status Error(std::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(model.source.empty() ? model.name : model.source,
                                                   " with ", engine.source, ": ",
                                                   AbslView(message)));
  }
};

// Shapes are per rank for the tensor_parallel_size and kv_cache_dtype the model was loaded with
// (LoadModel's options); planning them for other values would silently ignore the engine's.
absl::Status CheckModelLoadedForEngine(const PlanInputs& in) {
  const ModelSpec& model = in.model;
  const EngineConfig& engine = in.engine;
  if (model.tensor_parallel_size != engine.tensor_parallel_size) {
    return in.Error(absl::StrCat("the model's shapes are per rank at tensor_parallel_size ",
                                 model.tensor_parallel_size, " but the engine has ",
                                 engine.tensor_parallel_size,
                                 ": load the model with the engine's tensor_parallel_size"));
  }
  if (model.kv_cache_dtype != engine.kv_cache_dtype) {
    auto name = [](const std::optional<KvDtype>& d) {
      return d ? std::string(KvDtypeName(*d)) : std::string("auto");
    };
    return in.Error(absl::StrCat("the model was loaded with kv_cache_dtype ",
                                 name(model.kv_cache_dtype), " but the engine has ",
                                 name(engine.kv_cache_dtype),
                                 ": load the model with the engine's kv_cache_dtype"));
  }
  return absl::OkStatus();
}

// The model's concrete layers (drafter layers only with speculative decoding) and what the
// primary block size depends on.
struct ConcreteLayers {
  std::vector<LayerKv> layers;
  const LayerSpec* primary = nullptr;  // the first full-attention or MLA layer, else attention
  int64_t mamba_state_bytes = 0;       // the largest mamba state
};

absl::StatusOr<ConcreteLayers> ListLayers(const PlanInputs& in) {
  ConcreteLayers out;
  const LayerSpec* first_attention = nullptr;
  for (const LayerSpec& spec : in.model.layers) {
    if (spec.drafter && !in.engine.speculative.enabled) continue;
    if (IsAttention(spec.kind)) {
      if (first_attention == nullptr) first_attention = &spec;
      if (out.primary == nullptr && IsFullFamily(spec.kind)) out.primary = &spec;
    } else {
      out.mamba_state_bytes = std::max(out.mamba_state_bytes, spec.state_bytes);
    }
    for (int i = 0; i < spec.count; ++i) {
      LayerKv l{spec.kind, spec.drafter};
      if (IsAttention(spec.kind)) {
        l.per_token_bytes = spec.BytesPerToken();
        if (l.per_token_bytes <= 0) return in.Error("a layer has no KV bytes per token");
      } else {
        l.state_bytes = spec.state_bytes;
      }
      l.sliding_window = spec.sliding_window;
      l.attention_chunk_size = spec.attention_chunk_size;
      out.layers.push_back(l);
    }
  }
  if (out.layers.empty()) return in.Error("the model has no layers");
  if (first_attention == nullptr) {
    return in.Error("the model has no attention layers; prefixsim needs at least one");
  }
  if (out.primary == nullptr) out.primary = first_attention;
  return out;
}

// §4: the primary block size, raised for mamba alignment (with a warning in plan->warnings), and
// the page a mamba state is padded to (0 without mamba layers).
struct PrimaryBlock {
  int64_t block_size = 0;
  int64_t mamba_page_padded = 0;
};

PrimaryBlock ChoosePrimaryBlockSize(const PlanInputs& in, const ConcreteLayers& concrete,
                                    KvPlan* plan) {
  const AttentionBackend& primary_backend = in.engine.BackendFor(concrete.primary->kind);
  PrimaryBlock out;
  out.block_size = in.engine.block_size.value_or(
      concrete.mamba_state_bytes > 0 ? 16 : primary_backend.preferred_block_size);
  if (concrete.mamba_state_bytes > 0) {
    const int64_t a1 = concrete.primary->BytesPerToken();
    int64_t smallest_kernel = primary_backend.kernel_block_sizes.front().value;
    for (const auto& s : primary_backend.kernel_block_sizes) {
      smallest_kernel = std::min<int64_t>(smallest_kernel, s.value);
    }
    const int64_t k = std::max(smallest_kernel, out.block_size);
    // mode "all" aligns to lcm(mamba chunk, k); prefixsim has no mamba chunk size, so it uses k.
    const int64_t attn_block = k * CeilDiv(concrete.mamba_state_bytes, k * a1);
    if (out.block_size < attn_block) {
      plan->warnings.push_back(absl::StrCat("mamba alignment: setting attention block size to ",
                                            attn_block, " (was ", out.block_size, ")"));
      out.block_size = attn_block;
    }
    out.mamba_page_padded = out.block_size * a1;
  }
  return out;
}

// §5: each layer's block size and page under the policy; §6.1 step 1 when the hybrid manager is
// disabled.
void SpecifyLayers(const PlanInputs& in, const PrimaryBlock& primary,
                   std::vector<LayerKv>* layers) {
  const EngineConfig& engine = in.engine;
  const int64_t block_size = primary.block_size;
  for (LayerKv& l : *layers) {
    switch (l.kind) {
      case LayerKind::kSlidingWindow:
        l.block_size = in.policy.SlidingWindowBlockSize(
            engine.BackendFor(l.kind), l.per_token_bytes, engine.skip_page_size_padded,
            static_cast<int>(block_size));
        break;
      case LayerKind::kMamba:
        l.block_size = block_size;
        break;
      default:
        l.block_size = block_size;
    }
    l.real_page = l.RealPageAt(l.block_size);
    l.page = l.real_page;
    if (l.kind == LayerKind::kMamba && primary.mamba_page_padded > l.page) {
      l.page = primary.mamba_page_padded;
    }
    if (l.kind == LayerKind::kSlidingWindow && engine.skip_page_size_padded) {
      l.page = std::max(l.page, *engine.skip_page_size_padded);
    }
  }
  if (engine.disable_hybrid_kv_cache_manager) {
    // §6.1 step 1: windowed layers get full allocation (compute stays windowed).
    for (LayerKv& l : *layers) {
      if (l.kind == LayerKind::kSlidingWindow || l.kind == LayerKind::kChunkedLocal) {
        l.kind = LayerKind::kFullAttention;
        l.sliding_window = l.attention_chunk_size = 0;
        l.block_size = block_size;
        l.real_page = l.page = l.RealPageAt(block_size);
      }
    }
  }
}

// All layers in one group (§6.1: identical specs, a uniform type, or the fallback).
void PlanSingleGroup(const std::vector<LayerKv>& all, KvPlan* plan) {
  KvGroup g;
  g.kind = all.front().kind;
  g.block_size = static_cast<int>(all.front().block_size);
  g.sliding_window = all.front().sliding_window;
  g.attention_chunk_size = all.front().attention_chunk_size;
  int64_t sum = 0;
  for (const LayerKv& l : all) {
    ++g.num_layers;
    g.num_drafter_layers += l.drafter;
    sum += l.page;
    if (l.page > g.page_bytes) {
      g.page_bytes = l.page;
      g.padding_bytes = l.page - l.real_page;
    }
  }
  plan->groups.push_back(g);
  plan->group_size = g.num_layers;
  plan->bytes_per_block = sum;
}

// §6.2 unify_kv_cache_spec_page_size: the layers with every page raised to the largest (`false`
// when an MLA page can neither divide it nor be padded).
bool UnifyPageSizes(std::vector<LayerKv>* unified, int64_t max_page) {
  bool unify_ok = true;
  for (LayerKv& l : *unified) {
    if (l.page == max_page) continue;
    if (l.kind == LayerKind::kMamba) {
      l.page = max_page;
    } else if (max_page % l.page == 0) {
      const int64_t ratio = max_page / l.page;
      l.block_size *= ratio;
      l.real_page *= ratio;
      l.page = max_page;
    } else if (l.kind != LayerKind::kMla) {
      l.page = max_page;
    } else {
      unify_ok = false;
    }
  }
  return unify_ok;
}

// §6.3: bucket the unified layers by spec (in order of first appearance), group_size with the
// 1.5 rule, groups strided over each bucket and padded to group_size.
void PlanBucketedGroups(const std::vector<LayerKv>& unified, int64_t max_page, KvPlan* plan) {
  std::vector<std::vector<const LayerKv*>> buckets;
  for (const LayerKv& l : unified) {
    auto it = std::find_if(buckets.begin(), buckets.end(),
                           [&](const auto& b) { return b.front()->SpecKey() == l.SpecKey(); });
    if (it == buckets.end()) {
      buckets.push_back({&l});
    } else {
      it->push_back(&l);
    }
  }
  size_t min_layers = unified.size(), max_layers = 0;
  for (const auto& b : buckets) {
    min_layers = std::min(min_layers, b.size());
    max_layers = std::max(max_layers, b.size());
  }
  const int64_t group_size = static_cast<double>(max_layers) < 1.5 * static_cast<double>(min_layers)
                                 ? max_layers
                                 : min_layers;
  int64_t padding_layers = 0;
  for (const auto& b : buckets) {
    const int64_t n = static_cast<int64_t>(b.size());
    const int64_t num_groups = CeilDiv(n, group_size);
    for (int64_t i = 0; i < num_groups; ++i) {
      KvGroup g;
      const LayerKv& spec = *b.front();
      g.kind = spec.kind;
      g.block_size = static_cast<int>(spec.block_size);
      g.page_bytes = spec.page;
      g.padding_bytes = spec.page - spec.real_page;
      g.sliding_window = spec.sliding_window;
      g.attention_chunk_size = spec.attention_chunk_size;
      for (int64_t j = i; j < n; j += num_groups) {  // strided: bucket[i::num_groups]
        ++g.num_layers;
        g.num_drafter_layers += b[j]->drafter;
      }
      g.num_padding_layers = static_cast<int>(group_size - g.num_layers);
      padding_layers += g.num_padding_layers;
      plan->groups.push_back(g);
    }
  }
  plan->group_size = static_cast<int>(group_size);
  plan->bytes_per_block = group_size * max_page;
  if (padding_layers > 0) {
    plan->warnings.push_back(absl::StrFormat(
        "added %d padding layers to reach group_size %d, may waste at most %.1f%% of KV memory",
        padding_layers, group_size,
        100.0 * padding_layers / (padding_layers + static_cast<double>(unified.size()))));
  }
}

// §6.1: the grouping decision order.
absl::Status GroupLayers(const PlanInputs& in, int64_t block_size, std::vector<LayerKv>* layers,
                         KvPlan* plan) {
  const bool all_identical = std::all_of(layers->begin(), layers->end(), [&](const LayerKv& l) {
    return l.SpecKey() == layers->front().SpecKey();
  });
  if (all_identical || IsUniformType(*layers)) {
    PlanSingleGroup(*layers, plan);
    return absl::OkStatus();
  }
  int64_t max_page = 0;
  for (const LayerKv& l : *layers) max_page = std::max(max_page, l.page);
  std::vector<LayerKv> unified = *layers;
  if (UnifyPageSizes(&unified, max_page)) {
    PlanBucketedGroups(unified, max_page, plan);
    return absl::OkStatus();
  }
  // §6.1 step 7: the full-allocation fallback, only for MLA + regular SWA.
  const bool fallback_ok = std::all_of(layers->begin(), layers->end(), [](const LayerKv& l) {
    return l.kind == LayerKind::kMla || l.kind == LayerKind::kSlidingWindow;
  });
  if (!fallback_ok) {
    return in.Error(absl::StrFormat(
        "page sizes cannot be unified: the largest page is %d bytes and an MLA page of a "
        "smaller size neither divides it nor can be padded (padding only for non-MLA "
        "attention; docs/semantics.md §6.2)",
        max_page));
  }
  for (LayerKv& l : *layers) {
    if (l.kind == LayerKind::kSlidingWindow) {
      l.kind = LayerKind::kFullAttention;
      l.sliding_window = 0;
      l.block_size = block_size;
      l.real_page = l.page = l.RealPageAt(block_size);
    }
  }
  plan->full_allocation_fallback = true;
  plan->warnings.emplace_back(
      "page sizes cannot be unified: treating sliding-window layers as full attention");
  PlanSingleGroup(*layers, plan);
  return absl::OkStatus();
}

// §3.2: kernel block sizes (startup errors for blocks no kernel can run).
absl::Status SelectKernelBlockSizes(const PlanInputs& in, KvPlan* plan) {
  for (KvGroup& g : plan->groups) {
    if (g.kind == LayerKind::kMamba) {
      g.kernel_block_size = g.block_size;
      continue;
    }
    const AttentionBackend& backend = in.engine.BackendFor(g.kind);
    auto kernel = SelectKernelBlockSize(backend, g.block_size, g.padding_bytes > 0);
    if (!kernel.ok()) {
      // The group's block is the policy's choice, not always the block size asked for: say
      // where it came from and what the backend can run.
      std::vector<std::string> sizes;
      for (const auto& k : backend.kernel_block_sizes) {
        sizes.push_back(k.multiple_of ? absl::StrCat("multiples of ", k.value)
                                      : absl::StrCat(k.value));
      }
      return in.Error(absl::StrCat("the ", AbslView(LayerKindName(g.kind)), " layers' block of ",
                                   g.block_size, " tokens (policy ", AbslView(in.policy.name()),
                                   " with primary block size ", plan->primary_block_size,
                                   "): ", kernel.status().message(), " (", backend.name,
                                   " runs kernel blocks of ", absl::StrJoin(sizes, ", "),
                                   "); choose a block size whose groups' blocks these divide"));
    }
    g.kernel_block_size = *kernel;
  }
  return absl::OkStatus();
}

// §2.3: a mamba group keeps a state block per draft position (MambaBase.get_kv_cache_spec sets
// num_speculative_blocks to the engine's num_speculative_tokens).
void SetSpeculativeStateBlocks(const EngineConfig& engine, KvPlan* plan) {
  const int k = engine.speculative.enabled ? engine.speculative.num_speculative_tokens : 0;
  for (KvGroup& g : plan->groups) {
    if (g.kind == LayerKind::kMamba) g.num_speculative_blocks = k;
  }
}

// §6.4: the number of blocks, the blocks one max_model_len request holds, and the startup check.
absl::Status SizeMemory(const PlanInputs& in, KvPlan* plan) {
  const ModelSpec& model = in.model;
  const EngineConfig& engine = in.engine;
  if (engine.num_gpu_blocks) {
    plan->num_blocks = *engine.num_gpu_blocks;
  } else {
    plan->num_blocks = *engine.kv_cache_bytes / plan->bytes_per_block;
    // vLLM refuses to start without memory for one cache block besides the null block
    // (check_enough_kv_cache_memory: "No available memory for the cache blocks").
    if (plan->num_blocks < 2) {
      return in.Error(absl::StrCat("kv_cache_bytes ", *engine.kv_cache_bytes, " holds ",
                                   plan->num_blocks, " blocks of ", plan->bytes_per_block,
                                   " bytes; a KV cache needs at least 2 (one is the null block)"));
    }
  }
  if (plan->num_blocks > kMaxNumBlocks) {
    return in.Error(absl::StrCat(
        engine.num_gpu_blocks
            ? absl::StrCat("num_gpu_blocks ", *engine.num_gpu_blocks)
            : absl::StrCat("kv_cache_bytes ", *engine.kv_cache_bytes, " gives ", plan->num_blocks,
                           " blocks of ", plan->bytes_per_block, " bytes, which"),
        " is more than the ", kMaxNumBlocks, " blocks a pool can have; give fewer"));
  }
  for (const KvGroup& g : plan->groups) {
    plan->blocks_per_max_len_request += MaxPagesPerRequest(g, engine, plan->num_lookahead_tokens);
  }
  // docs/semantics.md §1 / §6.4: vLLM checks that one max_model_len request fits the available
  // memory (the null block's bytes subtracted), then applies num_gpu_blocks_override. So the check
  // runs only when the pool comes from kv_cache_bytes, and a failure is reported, not fatal here.
  if (engine.num_gpu_blocks) return absl::OkStatus();
  StartupCheck& check = plan->startup_check;
  check.performed = true;
  const int64_t usable = std::max<int64_t>(0, plan->num_blocks - 1);
  auto blocks_for = [&](int64_t len) {
    EngineConfig e = engine;
    e.max_model_len = len;
    int64_t blocks = 0;
    for (const KvGroup& g : plan->groups) {
      blocks += MaxPagesPerRequest(g, e, plan->num_lookahead_tokens);
    }
    return blocks;
  };
  // Largest max_model_len that fits (the bound is monotone in the length).
  int64_t lo = 0, hi = engine.max_model_len;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (blocks_for(mid) <= usable) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  check.max_fitting_model_len = lo;
  if (plan->blocks_per_max_len_request > usable) {
    check.ok = false;
    check.message = absl::StrFormat(
        "%s with %s: to serve one request of max_model_len %d the KV cache needs %d blocks "
        "(%d bytes), more than the %d usable blocks (%d bytes) that kv_cache_bytes %d gives "
        "(%d bytes per block, one block is the null block). Largest max_model_len that fits: "
        "%d. Raise kv_cache_bytes or lower max_model_len.",
        model.source.empty() ? model.name : model.source, engine.source, engine.max_model_len,
        plan->blocks_per_max_len_request, plan->blocks_per_max_len_request * plan->bytes_per_block,
        usable, usable * plan->bytes_per_block, *engine.kv_cache_bytes, plan->bytes_per_block, lo);
  }
  return absl::OkStatus();
}

// §7: scheduler and hash granularities, partial hits and the hit alignment.
absl::Status SetGranularities(const PlanInputs& in, KvPlan* plan) {
  const EngineConfig& engine = in.engine;
  const int64_t dcp = engine.decode_context_parallel_size;
  auto effective = [&](const KvGroup& g) -> int64_t {
    return g.kind == LayerKind::kMamba ? g.block_size : g.block_size * dcp;
  };
  bool partial_hits = false;
  if (plan->groups.size() <= 1) {
    plan->scheduler_block_size = plan->hash_block_size = plan->groups.front().block_size * dcp;
    if (engine.prefix_match_unit) {
      plan->warnings.emplace_back(
          "prefix_match_unit is ignored with a single KV cache group (hits align to its block)");
    }
  } else {
    int64_t s = 1;
    for (const KvGroup& g : plan->groups) s = std::lcm(s, effective(g));
    plan->scheduler_block_size = plan->hash_block_size = s;
    const bool has_non_align_mamba =
        engine.mamba_cache_mode != MambaCacheMode::kAlign &&
        std::any_of(plan->groups.begin(), plan->groups.end(),
                    [](const KvGroup& g) { return g.kind == LayerKind::kMamba; });
    if (engine.enable_prefix_caching && !has_non_align_mamba) {
      int64_t h = 0;
      for (const KvGroup& g : plan->groups) {
        if (g.prefix_cacheable) h = std::gcd(h, effective(g));
      }
      if (engine.prefix_match_unit) {
        h = *engine.prefix_match_unit;
        for (const KvGroup& g : plan->groups) {
          if (g.prefix_cacheable && effective(g) % h != 0) {
            return in.Error(absl::StrCat("field 'prefix_match_unit': invalid prefix_match_unit=", h,
                                         ": it must divide every group's block size, and ",
                                         effective(g), " is not a multiple"));
          }
        }
      }
      plan->hash_block_size = h;
      // Partial hits turn on only for an align-mode mamba group with B > H (B >= H under decode
      // context parallelism, docs/semantics.md §7), and off again if a prefix-cacheable group
      // lacks fine-grained lookup (sliding window) while its B != H.
      partial_hits = std::any_of(plan->groups.begin(), plan->groups.end(), [&](const KvGroup& g) {
        return g.kind == LayerKind::kMamba && (g.block_size > h || (dcp > 1 && g.block_size >= h));
      });
      if (partial_hits) {
        for (const KvGroup& g : plan->groups) {
          if (g.prefix_cacheable && g.kind == LayerKind::kSlidingWindow && effective(g) != h) {
            partial_hits = false;
            plan->warnings.emplace_back(
                "partial prefix hits disabled: the sliding-window group has no fine-grained "
                "lookup and its block size differs from the hash block size");
            break;
          }
        }
      }
    }
  }
  plan->partial_hits = partial_hits;
  plan->hit_alignment = partial_hits ? plan->hash_block_size : plan->scheduler_block_size;
  return absl::OkStatus();
}

// §6.3 / §9.4: EAGLE groups. Groups with drafter MLA layers are flagged; if none is, all are.
void MarkEagleGroups(const EngineConfig& engine, KvPlan* plan) {
  if (!UsesEagleBlockDrop(engine.speculative) || !engine.enable_prefix_caching) return;
  bool any = false;
  for (KvGroup& g : plan->groups) {
    g.is_eagle_group = g.kind == LayerKind::kMla && g.drafter();
    any |= g.is_eagle_group;
  }
  if (!any) {
    for (KvGroup& g : plan->groups) g.is_eagle_group = true;
  }
}

// docs/semantics.md §10.2: prefix_cache_retention_interval, resolved as vLLM's
// create_engine_config does an unset one (PR #55760, predicate as PR #55861 made it: a hybrid
// model, i.e. one with mamba layers, served with an EAGLE-family drafter keeps dense checkpoints,
// everything else 0), then validated as _validate_prefix_cache_retention_interval does.
absl::Status ResolveRetentionInterval(const PlanInputs& in, KvPlan* plan) {
  const EngineConfig& engine = in.engine;
  const RetentionInterval& given = engine.prefix_cache_retention_interval;
  bool mamba = false, sparse_groups = false;
  for (const KvGroup& g : plan->groups) {
    mamba |= g.kind == LayerKind::kMamba;
    sparse_groups |= g.kind == LayerKind::kMamba || g.kind == LayerKind::kSlidingWindow;
  }
  const SpeculativeConfig& spec = engine.speculative;
  const bool eagle_family = spec.enabled && (spec.method == "eagle" || spec.method == "eagle3" ||
                                             spec.method == "mtp" || spec.method == "dspark");
  switch (given.kind) {
    case RetentionInterval::Kind::kDense:
      plan->retention_interval.reset();
      plan->retention_interval_source = "engine";
      return absl::OkStatus();
    case RetentionInterval::Kind::kTokens:
      plan->retention_interval = given.tokens;
      plan->retention_interval_source = "engine";
      break;
    case RetentionInterval::Kind::kUnset:
      if (mamba && eagle_family) {
        plan->retention_interval.reset();
        plan->retention_interval_source =
            "vLLM's default for a hybrid model with an EAGLE-family drafter: dense";
        return absl::OkStatus();
      }
      plan->retention_interval = 0;
      plan->retention_interval_source = "vLLM's default: 0";
      return absl::OkStatus();
  }
  const int64_t n = *plan->retention_interval;
  if (!sparse_groups) {
    if (n == 0) return absl::OkStatus();
    return in.Error(absl::StrCat("prefix_cache_retention_interval ", n,
                                 " has no effect: the plan has no sliding-window or mamba group "
                                 "(give 0, or leave it unset)"));
  }
  if (n % plan->scheduler_block_size != 0) {
    return in.Error(absl::StrCat("prefix_cache_retention_interval ", n,
                                 " must be a multiple of the scheduler block size ",
                                 plan->scheduler_block_size));
  }
  return absl::OkStatus();
}

// Warnings about what the plan costs: hits coarser than the primary block, padded pages.
void WarnAboutCosts(int64_t block_size, KvPlan* plan) {
  if (plan->scheduler_block_size > block_size) {
    plan->warnings.push_back(absl::StrFormat(
        "scheduler block size %d is %.2fx the primary block size %d: prefix hits align to it",
        plan->scheduler_block_size, static_cast<double>(plan->scheduler_block_size) / block_size,
        block_size));
  }
  for (const KvGroup& g : plan->groups) {
    if (g.padding_bytes * 10 > g.page_bytes) {
      plan->warnings.push_back(
          absl::StrFormat("%s group pages are padded by %d bytes (%.1f%% of each page)",
                          AbslView(LayerKindName(g.kind)), g.padding_bytes,
                          100.0 * g.padding_bytes / g.page_bytes));
      break;
    }
  }
}

}  // namespace

absl::StatusOr<KvPlan> ResolveKvPlan(const ModelSpec& model, const EngineConfig& engine,
                                     std::string_view policy_name) {
  if (IsPolicyFilePath(policy_name)) {
    PREFIXSIM_ASSIGN_OR_RETURN(const std::unique_ptr<BlockSizePolicy> policy,
                               LoadPolicyFile(policy_name));
    return ResolveKvPlan(model, engine, *policy);
  }
  const BlockSizePolicy* policy = FindPolicy(policy_name);
  if (policy == nullptr) {
    return absl::InvalidArgumentError(PolicyRegistry().UnknownNameMessage(policy_name));
  }
  return ResolveKvPlan(model, engine, *policy);
}

absl::StatusOr<KvPlan> ResolveKvPlan(const ModelSpec& model, const EngineConfig& engine,
                                     const BlockSizePolicy& policy) {
  const PlanInputs in{model, engine, policy};
  PREFIXSIM_RETURN_IF_ERROR(CheckModelLoadedForEngine(in));
  KvPlan plan;
  plan.warnings = model.assumptions;
  plan.policy = std::string(policy.name());
  plan.enable_prefix_caching = engine.enable_prefix_caching;
  plan.max_model_len = engine.max_model_len;
  plan.num_lookahead_tokens = engine.speculative.LookaheadTokens();
  plan.cache_mamba_spec_boundary_states =
      engine.mamba_spec_boundary_states == MambaSpecBoundaryStates::kCached;

  PREFIXSIM_ASSIGN_OR_RETURN(ConcreteLayers concrete, ListLayers(in));
  const PrimaryBlock primary = ChoosePrimaryBlockSize(in, concrete, &plan);
  plan.primary_block_size = static_cast<int>(primary.block_size);
  SpecifyLayers(in, primary, &concrete.layers);
  PREFIXSIM_RETURN_IF_ERROR(GroupLayers(in, primary.block_size, &concrete.layers, &plan));
  PREFIXSIM_RETURN_IF_ERROR(SelectKernelBlockSizes(in, &plan));
  SetSpeculativeStateBlocks(engine, &plan);
  PREFIXSIM_RETURN_IF_ERROR(SizeMemory(in, &plan));
  PREFIXSIM_RETURN_IF_ERROR(SetGranularities(in, &plan));
  MarkEagleGroups(engine, &plan);
  PREFIXSIM_RETURN_IF_ERROR(ResolveRetentionInterval(in, &plan));
  WarnAboutCosts(primary.block_size, &plan);
  return plan;
}

absl::Status CheckStartupMemory(const KvPlan& plan) {
  if (!plan.startup_check.performed || plan.startup_check.ok) return absl::OkStatus();
  return absl::InvalidArgumentError(plan.startup_check.message);
}

absl::StatusOr<KvPlan> ResolvePlanForServing(const ModelSpec& model, const EngineConfig& engine,
                                             std::string_view policy) {
  PREFIXSIM_ASSIGN_OR_RETURN(KvPlan plan, ResolveKvPlan(model, engine, policy));
  PREFIXSIM_RETURN_IF_ERROR(CheckStartupMemory(plan));
  return plan;
}

std::string SmallPoolWarning(const KvPlan& plan) {
  const int64_t usable = plan.num_blocks - 1;
  if (plan.startup_check.performed || plan.blocks_per_max_len_request <= usable) return "";
  return absl::StrFormat(
      "policy %s: num_gpu_blocks %d leaves %d usable blocks, fewer than the %d one request of "
      "max_model_len %d needs; requests that cannot fit are skipped (does_not_fit), and a pool "
      "this small may thrash. Raise num_gpu_blocks or lower max_model_len.",
      plan.policy, plan.num_blocks, usable, plan.blocks_per_max_len_request, plan.max_model_len);
}

}  // namespace prefixsim
