#include "prefixsim/engine_config.h"

#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/plan/config_fields.h"
#include "sim/plan/json_config.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

const std::vector<std::string_view>& EngineFieldsAt(std::string_view path) {
  for (const ConfigObjectFields& object : EngineJsonFields()) {
    if (object.path == path) return object.fields;
  }
  PREFIXSIM_CHECK(false);
  return EngineJsonFields().front().fields;
}

struct BuiltinBackend {
  std::string_view name;
  std::vector<KernelBlockSize> sizes;
  int preferred_block_size;
};

// docs/semantics.md §3.1 (docs/design/attention_backends.md); preferred sizes from
// docs/semantics.md §4 (FlashMLA 64, CUTLASS_MLA 128, FA 16; the others are [inferred]).
const std::vector<BuiltinBackend>& BuiltinBackends() {
  static const auto* table = new std::vector<BuiltinBackend>{
      {"FLASH_ATTN", {{16, true}}, 16},
      {"TRITON_ATTN", {{16, true}}, 16},
      {"FLASHINFER", {{16, false}, {32, false}, {64, false}}, 16},
      {"FLEX_ATTENTION", {{1, true}}, 16},
      {"CPU_ATTN", {{1, true}}, 16},
      {"TREE_ATTN", {{16, true}}, 16},
      {"ROCM_ATTN", {{16, true}}, 16},
      {"ROCM_AITER_UNIFIED", {{16, true}}, 16},
      {"ROCM_AITER_FA", {{16, false}, {32, false}}, 16},
      {"TURBOQUANT", {{16, false}, {32, false}, {64, false}, {128, false}}, 16},
      {"FLASHMLA", {{64, false}}, 64},
      {"FLASHMLA_SPARSE", {{64, false}}, 64},
      {"FLASHINFER_MLA", {{32, false}, {64, false}}, 64},
      {"FLASHINFER_MLA_SPARSE", {{32, false}, {64, false}}, 64},
      {"CUTLASS_MLA", {{128, false}}, 128},
      {"TRITON_MLA", {{16, true}}, 16},
      {"FLASH_ATTN_MLA", {{16, true}}, 16},
      {"ROCM_AITER_MLA", {{1, false}}, 1},
      {"ROCM_AITER_MLA_SPARSE", {{1, false}}, 1},
  };
  return *table;
}

// Keys of the "backends" object. vLLM's KVCacheSpecKind names are accepted as aliases.
std::optional<LayerKind> BackendKindKey(std::string_view key) {
  if (auto kind = ParseLayerKind(key)) return kind;
  if (key == "mla_attention") return LayerKind::kMla;
  if (key == "chunked_local_attention") return LayerKind::kChunkedLocal;
  return std::nullopt;
}

absl::StatusOr<AttentionBackend> ParseBackend(const JsonConfig& doc, const nlohmann::json& value,
                                              const std::string& path) {
  if (value.is_string()) {
    auto backend = LookupBackend(value.get<std::string>());
    if (!backend.ok()) return doc.Error(path, StdView(backend.status().message()));
    return backend;
  }
  if (!value.is_object()) {
    return doc.Error(path, "must be a backend name or an object {name, kernel_block_sizes}");
  }
  PREFIXSIM_RETURN_IF_ERROR(RejectUnknownFields(doc, value, path, EngineFieldsAt("backend")));
  AttentionBackend backend;
  PREFIXSIM_ASSIGN_OR_RETURN(auto name, doc.OptionalString(value, path, "name"));
  if (!name) return doc.Error(JsonConfig::Join(path, "name"), "missing");
  backend.name = *name;
  auto builtin = LookupBackend(*name);
  auto sizes = value.find("kernel_block_sizes");
  if (sizes == value.end()) {
    if (!builtin.ok()) {
      return doc.Error(JsonConfig::Join(path, "kernel_block_sizes"),
                       absl::StrCat("missing (backend '", *name, "' is not built in)"));
    }
    backend = *builtin;
  } else {
    const std::string sizes_path = JsonConfig::Join(path, "kernel_block_sizes");
    if (!sizes->is_array() || sizes->empty()) {
      return doc.Error(sizes_path, "must be a non-empty list of sizes or {\"multiple_of\": N}");
    }
    for (size_t i = 0; i < sizes->size(); ++i) {
      const auto& item = (*sizes)[i];
      const std::string item_path = absl::StrCat(sizes_path, "[", i, "]");
      if (item.is_number_integer() && item.get<int64_t>() >= 1) {
        backend.kernel_block_sizes.push_back({static_cast<int>(item.get<int64_t>()), false});
      } else if (item.is_object()) {
        PREFIXSIM_ASSIGN_OR_RETURN(int64_t base,
                                   doc.RequiredInt(item, item_path, "multiple_of", 1));
        backend.kernel_block_sizes.push_back({static_cast<int>(base), true});
      } else {
        return doc.Error(item_path, "must be a positive integer or {\"multiple_of\": N}");
      }
    }
    backend.preferred_block_size = builtin.ok() ? builtin->preferred_block_size : 0;
  }
  PREFIXSIM_ASSIGN_OR_RETURN(auto preferred,
                             doc.OptionalInt(value, path, "preferred_block_size", 1));
  if (preferred) backend.preferred_block_size = static_cast<int>(*preferred);
  if (backend.preferred_block_size == 0) {
    // A custom backend without a preference: its smallest declared size.
    int smallest = backend.kernel_block_sizes.front().value;
    for (const auto& s : backend.kernel_block_sizes) smallest = std::min(smallest, s.value);
    backend.preferred_block_size = smallest;
  }
  return backend;
}

absl::Status ParseSpeculative(const JsonConfig& doc, const nlohmann::json& value,
                              SpeculativeConfig& spec) {
  const std::string path = "speculative";
  if (value.is_null()) return absl::OkStatus();
  if (!value.is_object()) return doc.Error(path, "must be an object or null");
  PREFIXSIM_RETURN_IF_ERROR(RejectUnknownFields(doc, value, path, EngineFieldsAt(path)));
  PREFIXSIM_ASSIGN_OR_RETURN(auto method, doc.OptionalString(value, path, "method"));
  if (method) spec.method = *method;
  PREFIXSIM_ASSIGN_OR_RETURN(auto k, doc.OptionalInt(value, path, "num_speculative_tokens", 0));
  spec.num_speculative_tokens = static_cast<int>(k.value_or(0));
  spec.enabled = spec.num_speculative_tokens > 0;
  if (value.contains("eagle_block_drop")) {
    return doc.Error(JsonConfig::Join(path, "eagle_block_drop"),
                     "replaced by vLLM's speculative.disable_eagle_block_drop (default false: the "
                     "eagle, eagle3, mtp and dspark methods drop the last matched block)");
  }
  PREFIXSIM_ASSIGN_OR_RETURN(auto no_drop,
                             doc.OptionalBool(value, path, "disable_eagle_block_drop"));
  spec.disable_eagle_block_drop = no_drop.value_or(false);
  auto acceptance = value.find("acceptance");
  if (acceptance != value.end() && !acceptance->is_null()) {
    const std::string apath = "speculative.acceptance";
    if (!acceptance->is_object()) return doc.Error(apath, "must be an object");
    PREFIXSIM_RETURN_IF_ERROR(RejectUnknownFields(doc, *acceptance, apath, EngineFieldsAt(apath)));
    PREFIXSIM_ASSIGN_OR_RETURN(auto model, doc.OptionalString(*acceptance, apath, "model"));
    if (model) spec.acceptance.model = *model;
    for (std::string_view key : {"rates", "histogram"}) {
      auto list = acceptance->find(std::string(key));
      if (list == acceptance->end()) continue;
      const std::string lpath = JsonConfig::Join(apath, key);
      if (!list->is_array()) return doc.Error(lpath, "must be a list of numbers");
      std::vector<double>& out = key == "rates" ? spec.acceptance.rates : spec.acceptance.histogram;
      for (size_t i = 0; i < list->size(); ++i) {
        const auto& item = (*list)[i];
        if (!item.is_number() || item.get<double>() < 0 ||
            (key == "rates" && item.get<double>() > 1)) {
          return doc.Error(absl::StrCat(lpath, "[", i, "]"), key == "rates"
                                                                 ? "must be a probability in [0, 1]"
                                                                 : "must be a non-negative weight");
        }
        out.push_back(item.get<double>());
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ParseCostModel(const JsonConfig& doc, const nlohmann::json& value,
                            CostModelConfig& cost) {
  const std::string path = "cost_model";
  if (!value.is_object()) return doc.Error(path, "must be an object");
  PREFIXSIM_RETURN_IF_ERROR(RejectUnknownFields(doc, value, path, EngineFieldsAt(path)));
  PREFIXSIM_ASSIGN_OR_RETURN(auto kind, doc.OptionalString(value, path, "kind"));
  if (kind) cost.kind = *kind;
  PREFIXSIM_ASSIGN_OR_RETURN(auto gpu, doc.OptionalString(value, path, "gpu"));
  if (gpu) cost.gpu = absl::AsciiStrToLower(*gpu);
  PREFIXSIM_ASSIGN_OR_RETURN(auto table, doc.OptionalString(value, path, "table"));
  if (table) cost.table_path = *table;
  return absl::OkStatus();
}

// "replicas": N | "auto"; "router": name | {"name", "overlap_weight", "ttft_slo_ms", "view",
// "event_delay_ms", "event_loss", "max_blocks", "ttl_s"} (the view's knobs: RouterViewConfig).
absl::Status ParseFleet(const JsonConfig& doc, const nlohmann::json& root, FleetConfig& fleet) {
  if (auto it = root.find("replicas"); it != root.end() && !it->is_null()) {
    if (it->is_string() && it->get<std::string>() == "auto") {
      fleet.auto_replicas = true;
    } else if (it->is_number_integer() && it->get<int64_t>() >= 1 &&
               it->get<int64_t>() <= kMaxReplicas) {
      fleet.replicas = static_cast<int>(it->get<int64_t>());
    } else {
      return doc.Error("replicas",
                       absl::StrCat("must be an integer in [1, ", kMaxReplicas, "] or \"auto\""));
    }
  }
  auto it = root.find("router");
  if (it == root.end() || it->is_null()) return absl::OkStatus();
  if (it->is_string()) {
    fleet.router = it->get<std::string>();
    return absl::OkStatus();
  }
  if (!it->is_object())
    return doc.Error("router", "must be a router name or an object {name, ...}");
  PREFIXSIM_RETURN_IF_ERROR(RejectUnknownFields(doc, *it, "router", EngineFieldsAt("router")));
  PREFIXSIM_ASSIGN_OR_RETURN(auto name, doc.OptionalString(*it, "router", "name"));
  if (name) fleet.router = *name;
  PREFIXSIM_ASSIGN_OR_RETURN(auto weight,
                             doc.OptionalNumber(*it, "router", "overlap_weight", 0, 1e9));
  if (weight) fleet.overlap_weight = *weight;
  PREFIXSIM_ASSIGN_OR_RETURN(auto slo, doc.OptionalNumber(*it, "router", "ttft_slo_ms", 0, 1e12));
  if (slo) fleet.ttft_slo_ms = *slo;
  PREFIXSIM_ASSIGN_OR_RETURN(auto view, doc.OptionalString(*it, "router", "view"));
  if (view) fleet.view.kind = *view;
  PREFIXSIM_ASSIGN_OR_RETURN(auto delay,
                             doc.OptionalNumber(*it, "router", "event_delay_ms", 0, 1e12));
  if (delay) fleet.view.event_delay_ms = *delay;
  PREFIXSIM_ASSIGN_OR_RETURN(auto loss, doc.OptionalNumber(*it, "router", "event_loss", 0, 1));
  if (loss) fleet.view.event_loss = *loss;
  // 0 would read as "unset" (as many blocks as the fleet holds; never forget): refused instead.
  PREFIXSIM_ASSIGN_OR_RETURN(auto max_blocks,
                             doc.OptionalNumber(*it, "router", "max_blocks", 1, 1e15));
  if (max_blocks) fleet.view.max_blocks = static_cast<int64_t>(*max_blocks);
  PREFIXSIM_ASSIGN_OR_RETURN(auto ttl, doc.OptionalNumber(*it, "router", "ttl_s", 1e-3, 1e12));
  if (ttl) fleet.view.ttl_s = *ttl;
  PREFIXSIM_ASSIGN_OR_RETURN(auto cpu_w,
                             doc.OptionalNumber(*it, "router", "cpu_tier_weight", 0, 1e6));
  if (cpu_w) fleet.view.cpu_tier_weight = *cpu_w;
  PREFIXSIM_ASSIGN_OR_RETURN(auto storage_w,
                             doc.OptionalNumber(*it, "router", "storage_tier_weight", 0, 1e6));
  if (storage_w) fleet.view.storage_tier_weight = *storage_w;
  return absl::OkStatus();
}

// vLLM's native KV offloading (docs/semantics.md §16): "kv_offloading_size" (GiB) turns it on;
// "kv_transfer_config": {"kv_connector": "OffloadingConnector", "kv_connector_extra_config":
// {store_threshold, offload_prompt_only, eviction_policy, secondary_tiers: [{type, capacity,
// read_gbps, write_gbps}]}}; prefixsim's own link and slot sizing in "kv_offload_link".
absl::Status ParseOffload(const JsonConfig& doc, const nlohmann::json& root,
                          KvOffloadConfig& offload) {
  PREFIXSIM_ASSIGN_OR_RETURN(auto size, doc.OptionalNumber(root, "", "kv_offloading_size", 0, 1e9));
  if (size) offload.kv_offloading_size_gib = *size;
  if (auto it = root.find("kv_transfer_config"); it != root.end() && !it->is_null()) {
    const std::string path = "kv_transfer_config";
    if (!it->is_object()) return doc.Error(path, "must be an object");
    PREFIXSIM_RETURN_IF_ERROR(RejectUnknownFields(doc, *it, path, EngineFieldsAt(path)));
    PREFIXSIM_ASSIGN_OR_RETURN(auto connector, doc.OptionalString(*it, path, "kv_connector"));
    if (connector && *connector != "OffloadingConnector") {
      return doc.Error(JsonConfig::Join(path, "kv_connector"),
                       absl::StrCat("'", *connector,
                                    "' is not simulated (prefixsim models vLLM's native "
                                    "OffloadingConnector)"));
    }
    PREFIXSIM_ASSIGN_OR_RETURN(auto role, doc.OptionalString(*it, path, "kv_role"));
    if (role && *role != "kv_both") {
      return doc.Error(
          JsonConfig::Join(path, "kv_role"),
          absl::StrCat("'", *role, "': offloading both stores and loads, so vLLM sets kv_both"));
    }
    if (auto ex = it->find("kv_connector_extra_config"); ex != it->end() && !ex->is_null()) {
      const std::string xpath = "kv_transfer_config.kv_connector_extra_config";
      if (!ex->is_object()) return doc.Error(xpath, "must be an object");
      PREFIXSIM_RETURN_IF_ERROR(RejectUnknownFields(doc, *ex, xpath, EngineFieldsAt(xpath)));
      PREFIXSIM_ASSIGN_OR_RETURN(auto threshold, doc.OptionalInt(*ex, xpath, "store_threshold", 0));
      if (threshold) offload.store_threshold = *threshold;
      PREFIXSIM_ASSIGN_OR_RETURN(auto prompt_only,
                                 doc.OptionalBool(*ex, xpath, "offload_prompt_only"));
      if (prompt_only) offload.offload_prompt_only = *prompt_only;
      PREFIXSIM_ASSIGN_OR_RETURN(auto eviction, doc.OptionalString(*ex, xpath, "eviction_policy"));
      if (eviction && *eviction != "lru") {
        return doc.Error(JsonConfig::Join(xpath, "eviction_policy"),
                         absl::StrCat("'", *eviction, "' is not simulated (known: lru)"));
      }
      if (auto tiers = ex->find("secondary_tiers"); tiers != ex->end() && !tiers->is_null()) {
        const std::string tpath = JsonConfig::Join(xpath, "secondary_tiers");
        if (!tiers->is_array()) return doc.Error(tpath, "must be an array of tier objects");
        if (tiers->size() > static_cast<size_t>(kMaxSecondaryTiers)) {
          return doc.Error(tpath, absl::StrCat("at most ", kMaxSecondaryTiers, " tiers"));
        }
        for (size_t i = 0; i < tiers->size(); ++i) {
          const nlohmann::json& t = (*tiers)[i];
          const std::string epath = absl::StrCat(tpath, "[", i, "]");
          if (!t.is_object()) return doc.Error(epath, "must be an object {type, capacity, ...}");
          PREFIXSIM_RETURN_IF_ERROR(
              RejectUnknownFields(doc, t, epath, EngineFieldsAt("secondary_tier")));
          SecondaryTierConfig tier;
          PREFIXSIM_ASSIGN_OR_RETURN(auto type, doc.OptionalString(t, epath, "type"));
          if (type) tier.type = *type;
          if (tier.type != "fs" && tier.type != "obj" && tier.type != "p2p") {
            return doc.Error(
                JsonConfig::Join(epath, "type"),
                absl::StrCat("unknown tier type '", tier.type, "' (known: fs, obj, p2p)"));
          }
          PREFIXSIM_ASSIGN_OR_RETURN(auto capacity, doc.OptionalByteSize(t, epath, "capacity"));
          if (!capacity || *capacity <= 0) {
            return doc.Error(JsonConfig::Join(epath, "capacity"),
                             "missing or not positive (bytes, or a size such as \"4TiB\")");
          }
          tier.capacity_bytes = *capacity;
          PREFIXSIM_ASSIGN_OR_RETURN(auto read,
                                     doc.OptionalNumber(t, epath, "read_gbps", 1e-6, 1e6));
          if (read) tier.read_bytes_per_s = *read * 1e9;
          PREFIXSIM_ASSIGN_OR_RETURN(auto write,
                                     doc.OptionalNumber(t, epath, "write_gbps", 1e-6, 1e6));
          if (write) tier.write_bytes_per_s = *write * 1e9;
          PREFIXSIM_ASSIGN_OR_RETURN(auto shared, doc.OptionalBool(t, epath, "shared"));
          if (shared) tier.shared = *shared;
          offload.secondary_tiers.push_back(tier);
        }
      }
    }
  }
  if (auto it = root.find("kv_offload_link"); it != root.end() && !it->is_null()) {
    const std::string path = "kv_offload_link";
    if (!it->is_object()) return doc.Error(path, "must be an object");
    PREFIXSIM_RETURN_IF_ERROR(RejectUnknownFields(doc, *it, path, EngineFieldsAt(path)));
    PREFIXSIM_ASSIGN_OR_RETURN(auto load, doc.OptionalNumber(*it, path, "load_gbps", 1e-6, 1e6));
    if (load) offload.cpu_load_bytes_per_s = *load * 1e9;
    PREFIXSIM_ASSIGN_OR_RETURN(auto store, doc.OptionalNumber(*it, path, "store_gbps", 1e-6, 1e6));
    if (store) offload.cpu_store_bytes_per_s = *store * 1e9;
    PREFIXSIM_ASSIGN_OR_RETURN(auto sizing, doc.OptionalString(*it, path, "slot_sizing"));
    if (sizing) {
      auto parsed = ParseOffloadSlotSizing(*sizing);
      if (!parsed) {
        return doc.Error(
            JsonConfig::Join(path, "slot_sizing"),
            absl::StrCat("unknown sizing '", *sizing, "' (known: row_per_key, largest_group)"));
      }
      offload.slot_sizing = *parsed;
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<OffloadSlotSizing> ParseOffloadSlotSizing(std::string_view name) {
  if (name == "row_per_key") return OffloadSlotSizing::kRowPerKey;
  if (name == "largest_group") return OffloadSlotSizing::kLargestGroup;
  return std::nullopt;
}

std::string_view OffloadSlotSizingName(OffloadSlotSizing sizing) {
  return sizing == OffloadSlotSizing::kRowPerKey ? "row_per_key" : "largest_group";
}

const std::vector<ConfigObjectFields>& EngineJsonFields() {
  static const auto* fields = new std::vector<ConfigObjectFields>{
      {"",
       {"block_size",
        "backend",
        "backends",
        "kv_cache_bytes",
        "num_gpu_blocks",
        "max_num_batched_tokens",
        "max_num_seqs",
        "max_model_len",
        "long_prefill_token_threshold",
        "prefix_match_unit",
        "prefix_cache_retention_interval",
        "enable_prefix_caching",
        "enable_chunked_prefill",
        "scheduler_reserve_full_isl",
        "disable_hybrid_kv_cache_manager",
        "mamba_cache_mode",
        "mamba_spec_boundary_states",
        "kv_cache_dtype",
        "tensor_parallel_size",
        "decode_context_parallel_size",
        "skip_page_size_padded",
        "speculative",
        "kv_offloading_size",
        "kv_transfer_config",
        "kv_offload_link",
        "cost_model",
        "replicas",
        "router",
        "description"}},
      // An object value of "backend" or of "backends.<kind>".
      {"backend", {"name", "kernel_block_sizes", "preferred_block_size"}},
      {"speculative",
       {"method", "num_speculative_tokens", "disable_eagle_block_drop", "eagle_block_drop",
        "acceptance"}},
      {"speculative.acceptance", {"model", "rates", "histogram"}},
      {"cost_model", {"kind", "gpu", "table"}},
      {"kv_transfer_config", {"kv_connector", "kv_role", "kv_connector_extra_config"}},
      {"kv_transfer_config.kv_connector_extra_config",
       {"store_threshold", "offload_prompt_only", "eviction_policy", "secondary_tiers"}},
      // One element of the secondary_tiers array.
      {"secondary_tier", {"type", "capacity", "read_gbps", "write_gbps", "shared"}},
      {"kv_offload_link", {"load_gbps", "store_gbps", "slot_sizing"}},
      {"router",
       {"name", "overlap_weight", "ttft_slo_ms", "view", "event_delay_ms", "event_loss",
        "max_blocks", "ttl_s", "cpu_tier_weight", "storage_tier_weight"}},
  };
  return *fields;
}

absl::StatusOr<AttentionBackend> LookupBackend(std::string_view name) {
  const std::string upper = absl::AsciiStrToUpper(AbslView(name));
  for (const auto& b : BuiltinBackends()) {
    if (b.name == upper)
      return AttentionBackend{std::string(b.name), b.sizes, b.preferred_block_size};
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown attention backend '", AbslView(name), "' (built in: ",
      absl::StrJoin(BuiltinBackendNames(), ", "), "; or give {name, kernel_block_sizes})"));
}

std::vector<std::string> BuiltinBackendNames() {
  std::vector<std::string> names;
  for (const auto& b : BuiltinBackends()) names.emplace_back(b.name);
  return names;
}

std::string_view MambaCacheModeName(MambaCacheMode mode) {
  switch (mode) {
    case MambaCacheMode::kNone:
      return "none";
    case MambaCacheMode::kAlign:
      return "align";
    case MambaCacheMode::kAll:
      return "all";
  }
  return "?";
}

std::string_view MambaSpecBoundaryStatesName(MambaSpecBoundaryStates mode) {
  return mode == MambaSpecBoundaryStates::kCached ? "cached" : "skipped";
}

int SpeculativeConfig::LookaheadTokens() const {
  if (!enabled) return 0;
  // docs/semantics.md §11: ngram/suffix/medusa proposers need no lookahead KV slots.
  if (method == "ngram" || method == "suffix" || method == "medusa") return 0;
  return num_speculative_tokens;
}

const AttentionBackend& EngineConfig::BackendFor(LayerKind kind) const {
  auto it = backends.find(kind);
  return it != backends.end() ? it->second : default_backend;
}

absl::StatusOr<EngineConfig> ParseEngineJson(std::string_view text, std::string_view source) {
  PREFIXSIM_ASSIGN_OR_RETURN(JsonConfig doc, JsonConfig::Parse(text, source));
  const nlohmann::json& root = doc.root();
  if (!root.is_object()) return doc.Error("", "an engine config must be a JSON object");
  PREFIXSIM_RETURN_IF_ERROR(RejectUnknownFields(doc, root, "", EngineFieldsAt("")));
  EngineConfig engine;
  engine.source = std::string(source);
  engine.default_backend = *LookupBackend("FLASH_ATTN");
  // MLA layers cannot run FLASH_ATTN; vLLM's automatic choice on Hopper is FlashMLA [inferred].
  engine.backends[LayerKind::kMla] = *LookupBackend("FLASHMLA");

  PREFIXSIM_ASSIGN_OR_RETURN(auto block_size, doc.OptionalInt(root, "", "block_size", 1));
  if (block_size) engine.block_size = static_cast<int>(*block_size);
  if (auto it = root.find("backend"); it != root.end() && !it->is_null()) {
    PREFIXSIM_ASSIGN_OR_RETURN(engine.default_backend, ParseBackend(doc, *it, "backend"));
  }
  if (auto it = root.find("backends"); it != root.end() && !it->is_null()) {
    if (!it->is_object()) return doc.Error("backends", "must be an object {kind: backend}");
    for (const auto& [key, value] : it->items()) {
      const std::string path = absl::StrCat("backends.", key);
      auto kind = BackendKindKey(key);
      if (!kind || *kind == LayerKind::kMamba) {
        return doc.Error(path,
                         "unknown attention kind (known: full_attention, mla, "
                         "sliding_window, chunked_local)");
      }
      PREFIXSIM_ASSIGN_OR_RETURN(engine.backends[*kind], ParseBackend(doc, value, path));
    }
  }
  PREFIXSIM_ASSIGN_OR_RETURN(engine.kv_cache_bytes,
                             doc.OptionalByteSize(root, "", "kv_cache_bytes"));
  PREFIXSIM_ASSIGN_OR_RETURN(engine.num_gpu_blocks, doc.OptionalInt(root, "", "num_gpu_blocks", 2));
  struct IntField {
    std::string_view key;
    int64_t* out;
    int64_t min_value;
  };
  for (const IntField& f :
       {IntField{"max_num_batched_tokens", &engine.max_num_batched_tokens, 1},
        IntField{"max_num_seqs", &engine.max_num_seqs, 1},
        IntField{"max_model_len", &engine.max_model_len, 2},
        IntField{"long_prefill_token_threshold", &engine.long_prefill_token_threshold, 0}}) {
    PREFIXSIM_ASSIGN_OR_RETURN(auto v, doc.OptionalInt(root, "", f.key, f.min_value));
    if (v) *f.out = *v;
  }
  PREFIXSIM_ASSIGN_OR_RETURN(auto pmu, doc.OptionalInt(root, "", "prefix_match_unit", 1));
  if (pmu) engine.prefix_match_unit = static_cast<int>(*pmu);
  if (auto it = root.find("prefix_cache_retention_interval"); it != root.end()) {
    if (it->is_null()) {
      engine.prefix_cache_retention_interval.kind = RetentionInterval::Kind::kDense;
    } else {
      PREFIXSIM_ASSIGN_OR_RETURN(auto tokens,
                                 doc.OptionalInt(root, "", "prefix_cache_retention_interval", 0));
      engine.prefix_cache_retention_interval = {RetentionInterval::Kind::kTokens, *tokens};
    }
  }
  for (auto [key, out] :
       {std::pair<std::string_view, bool*>{"enable_prefix_caching", &engine.enable_prefix_caching},
        {"enable_chunked_prefill", &engine.enable_chunked_prefill},
        {"scheduler_reserve_full_isl", &engine.scheduler_reserve_full_isl},
        {"disable_hybrid_kv_cache_manager", &engine.disable_hybrid_kv_cache_manager}}) {
    PREFIXSIM_ASSIGN_OR_RETURN(auto v, doc.OptionalBool(root, "", key));
    if (v) *out = *v;
  }
  PREFIXSIM_ASSIGN_OR_RETURN(auto mode, doc.OptionalString(root, "", "mamba_cache_mode"));
  if (mode) {
    if (*mode == "none") {
      engine.mamba_cache_mode = MambaCacheMode::kNone;
    } else if (*mode == "align") {
      engine.mamba_cache_mode = MambaCacheMode::kAlign;
    } else if (*mode == "all") {
      engine.mamba_cache_mode = MambaCacheMode::kAll;
    } else {
      return doc.Error("mamba_cache_mode",
                       absl::StrCat("unknown mode '", *mode, "' (known: none, align, all)"));
    }
  }
  PREFIXSIM_ASSIGN_OR_RETURN(auto spec_states,
                             doc.OptionalString(root, "", "mamba_spec_boundary_states"));
  if (spec_states) {
    if (*spec_states == "cached") {
      engine.mamba_spec_boundary_states = MambaSpecBoundaryStates::kCached;
    } else if (*spec_states == "skipped") {
      engine.mamba_spec_boundary_states = MambaSpecBoundaryStates::kSkipped;
    } else {
      return doc.Error("mamba_spec_boundary_states",
                       absl::StrCat("unknown value '", *spec_states, "' (known: cached, skipped)"));
    }
  }
  PREFIXSIM_ASSIGN_OR_RETURN(auto kv_dtype, doc.OptionalString(root, "", "kv_cache_dtype"));
  if (kv_dtype && *kv_dtype != "auto") {
    engine.kv_cache_dtype = ParseKvDtype(*kv_dtype);
    if (!engine.kv_cache_dtype) {
      return doc.Error("kv_cache_dtype", absl::StrCat("unknown dtype '", *kv_dtype,
                                                      "' (known: ", KvDtypeSpellings(), ")"));
    }
  }
  PREFIXSIM_ASSIGN_OR_RETURN(auto tp, doc.OptionalInt(root, "", "tensor_parallel_size", 1));
  if (tp) engine.tensor_parallel_size = static_cast<int>(*tp);
  PREFIXSIM_ASSIGN_OR_RETURN(auto dcp,
                             doc.OptionalInt(root, "", "decode_context_parallel_size", 1));
  if (dcp) engine.decode_context_parallel_size = static_cast<int>(*dcp);
  PREFIXSIM_ASSIGN_OR_RETURN(engine.skip_page_size_padded,
                             doc.OptionalInt(root, "", "skip_page_size_padded", 1));
  if (auto it = root.find("speculative"); it != root.end()) {
    PREFIXSIM_RETURN_IF_ERROR(ParseSpeculative(doc, *it, engine.speculative));
  }
  if (auto it = root.find("cost_model"); it != root.end()) {
    PREFIXSIM_RETURN_IF_ERROR(ParseCostModel(doc, *it, engine.cost_model));
  }
  PREFIXSIM_RETURN_IF_ERROR(ParseFleet(doc, root, engine.fleet));
  PREFIXSIM_RETURN_IF_ERROR(ParseOffload(doc, root, engine.kv_offload));
  absl::Status valid = ValidateEngineConfig(engine);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(AbslView(source), ": ", valid.message()));
  }
  return engine;
}

absl::Status ValidateEngineConfig(const EngineConfig& engine) {
  if (!engine.kv_cache_bytes && !engine.num_gpu_blocks) {
    return absl::InvalidArgumentError(
        "field 'kv_cache_bytes': missing (give kv_cache_bytes or num_gpu_blocks)");
  }
  const SpeculativeConfig& spec = engine.speculative;
  if (spec.enabled) {
    static constexpr std::array<std::string_view, 8> kMethods = {
        "eagle", "eagle3", "mtp", "dspark", "draft_model", "ngram", "suffix", "medusa"};
    if (std::find(kMethods.begin(), kMethods.end(), spec.method) == kMethods.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field 'speculative.method': unknown method '", spec.method,
          "' (known: eagle, eagle3, mtp, dspark, draft_model, ngram, suffix, medusa)"));
    }
    const AcceptanceConfig& a = spec.acceptance;
    const size_t k = static_cast<size_t>(spec.num_speculative_tokens);
    if (a.model == "geometric") {
      if (a.rates.size() != 1) {
        return absl::InvalidArgumentError(
            "field 'speculative.acceptance.rates': the geometric model takes exactly one rate");
      }
    } else if (a.model == "per_position") {
      if (a.rates.size() != k) {
        return absl::InvalidArgumentError(absl::StrCat(
            "field 'speculative.acceptance.rates': per_position needs one rate per draft "
            "position (",
            k, "), got ", a.rates.size()));
      }
    } else if (a.model == "empirical") {
      double total = 0;
      for (double w : a.histogram) total += w;
      if (a.histogram.size() != k + 1 || total <= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "field 'speculative.acceptance.histogram': empirical needs ", k + 1,
            " non-negative weights (accepting 0..", k, " drafts) with a positive sum"));
      }
    } else if (a.model != "trace") {
      return absl::InvalidArgumentError(
          absl::StrCat("field 'speculative.acceptance.model': unknown model '", a.model,
                       "' (known: geometric, per_position, empirical, trace)"));
    }
  }
  if (engine.cost_model.kind != "analytic" && engine.cost_model.kind != "table" &&
      engine.cost_model.kind != "measured") {
    return absl::InvalidArgumentError(absl::StrCat("field 'cost_model.kind': unknown kind '",
                                                   engine.cost_model.kind,
                                                   "' (known: analytic, table, measured)"));
  }
  if ((engine.cost_model.kind == "table" || engine.cost_model.kind == "measured") &&
      engine.cost_model.table_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field 'cost_model.table': missing for kind '", engine.cost_model.kind, "'"));
  }
  const FleetConfig& fleet = engine.fleet;
  if (fleet.replicas < 1 || fleet.replicas > kMaxReplicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("field 'replicas': ", fleet.replicas, " is not in [1, ", kMaxReplicas, "]"));
  }
  if (!(fleet.overlap_weight >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field 'router.overlap_weight': ", fleet.overlap_weight, " is not a number >= 0"));
  }
  if (!(fleet.ttft_slo_ms > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field 'router.ttft_slo_ms': ", fleet.ttft_slo_ms, " is not a positive number"));
  }
  const KvOffloadConfig& offload = engine.kv_offload;
  if (!(offload.kv_offloading_size_gib >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field 'kv_offloading_size': ", offload.kv_offloading_size_gib, " is not a size >= 0"));
  }
  if (offload.store_threshold < 0) {
    return absl::InvalidArgumentError(
        "field 'kv_transfer_config.kv_connector_extra_config.store_threshold': must be >= 0");
  }
  if (!offload.enabled() && !offload.secondary_tiers.empty()) {
    return absl::InvalidArgumentError(
        "field 'kv_transfer_config.kv_connector_extra_config.secondary_tiers': secondary tiers "
        "are staged through the CPU tier, which is off (set kv_offloading_size)");
  }
  // vLLM's TieringOffloadingSpec refuses a threshold with secondary tiers.
  if (offload.store_threshold >= 2 && !offload.secondary_tiers.empty()) {
    return absl::InvalidArgumentError(
        "field 'kv_transfer_config.kv_connector_extra_config.store_threshold': vLLM refuses "
        "store_threshold >= 2 with secondary tiers");
  }
  return absl::OkStatus();
}

absl::StatusOr<EngineConfig> LoadEngine(std::string_view path_or_preset) {
  PREFIXSIM_ASSIGN_OR_RETURN(std::string path, ResolvePresetPath(path_or_preset, "engines"));
  PREFIXSIM_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseEngineJson(text, path);
}

}  // namespace prefixsim
