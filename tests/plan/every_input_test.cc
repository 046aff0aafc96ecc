// Every input takes effect or is refused (issue 26): each override flag of resolve/replay, each
// engine JSON field and each native model JSON field, enumerated from the code (the CLI11 app and
// the field tables of sim/plan/config_fields.h), must change the resolved plan or the replay
// configuration, or be refused (InvalidArgument, exit 2) saying why. A flag or field added
// without an entry here fails the walk.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
#include "sim/cli/common.h"
#include "sim/plan/config_fields.h"
#include "sim/plan/json_config.h"
#include "sim/plan/plan_format.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

// Every member of the engine configuration a replay reads, by name.
std::map<std::string, std::string> EngineFingerprint(const EngineConfig& e) {
  auto backend = [](const AttentionBackend& b) {
    std::ostringstream s;
    s << b.name << "/" << b.preferred_block_size << ":";
    for (const KernelBlockSize& k : b.kernel_block_sizes)
      s << k.value << (k.multiple_of ? "x" : "") << ",";
    return s.str();
  };
  std::map<std::string, std::string> f;
  f["block_size"] = e.block_size ? std::to_string(*e.block_size) : "-";
  std::string backends;
  for (const auto& [kind, b] : e.backends)
    backends += std::string(LayerKindName(kind)) + "=" + backend(b) + ";";
  f["backends"] = backends;
  f["default_backend"] = backend(e.default_backend);
  f["kv_cache_bytes"] = e.kv_cache_bytes ? std::to_string(*e.kv_cache_bytes) : "-";
  f["num_gpu_blocks"] = e.num_gpu_blocks ? std::to_string(*e.num_gpu_blocks) : "-";
  f["max_num_batched_tokens"] = std::to_string(e.max_num_batched_tokens);
  f["max_num_seqs"] = std::to_string(e.max_num_seqs);
  f["max_model_len"] = std::to_string(e.max_model_len);
  f["enable_prefix_caching"] = std::to_string(e.enable_prefix_caching);
  f["enable_chunked_prefill"] = std::to_string(e.enable_chunked_prefill);
  f["scheduler_reserve_full_isl"] = std::to_string(e.scheduler_reserve_full_isl);
  f["prefix_cache_retention_interval"] =
      e.prefix_cache_retention_interval.kind == RetentionInterval::Kind::kUnset
          ? "unset"
          : (e.prefix_cache_retention_interval.kind == RetentionInterval::Kind::kDense
                 ? "dense"
                 : std::to_string(e.prefix_cache_retention_interval.tokens));
  f["long_prefill_token_threshold"] = std::to_string(e.long_prefill_token_threshold);
  f["prefix_match_unit"] = e.prefix_match_unit ? std::to_string(*e.prefix_match_unit) : "-";
  f["mamba_cache_mode"] = std::string(MambaCacheModeName(e.mamba_cache_mode));
  f["mamba_spec_boundary_states"] =
      std::string(MambaSpecBoundaryStatesName(e.mamba_spec_boundary_states));
  f["kv_cache_dtype"] = e.kv_cache_dtype ? std::string(KvDtypeName(*e.kv_cache_dtype)) : "auto";
  f["tensor_parallel_size"] = std::to_string(e.tensor_parallel_size);
  f["decode_context_parallel_size"] = std::to_string(e.decode_context_parallel_size);
  f["skip_page_size_padded"] =
      e.skip_page_size_padded ? std::to_string(*e.skip_page_size_padded) : "-";
  f["disable_hybrid_kv_cache_manager"] = std::to_string(e.disable_hybrid_kv_cache_manager);
  const SpeculativeConfig& s = e.speculative;
  f["speculative.enabled"] = std::to_string(s.enabled);
  f["speculative.method"] = s.method;
  f["speculative.num_speculative_tokens"] = std::to_string(s.num_speculative_tokens);
  f["speculative.disable_eagle_block_drop"] = s.disable_eagle_block_drop ? "true" : "false";
  f["speculative.acceptance.model"] = s.acceptance.model;
  f["speculative.acceptance.rates"] = Json(s.acceptance.rates).dump();
  f["speculative.acceptance.histogram"] = Json(s.acceptance.histogram).dump();
  f["cost_model.kind"] = e.cost_model.kind;
  f["cost_model.gpu"] = e.cost_model.gpu;
  f["cost_model.table"] = e.cost_model.table_path;
  f["replicas"] = std::to_string(e.fleet.replicas) + (e.fleet.auto_replicas ? " auto" : "");
  f["router.name"] = e.fleet.router;
  f["router.overlap_weight"] = std::to_string(e.fleet.overlap_weight);
  f["router.ttft_slo_ms"] = std::to_string(e.fleet.ttft_slo_ms);
  f["router.view"] = e.fleet.view.kind;
  f["router.event_delay_ms"] = std::to_string(e.fleet.view.event_delay_ms);
  f["router.event_loss"] = std::to_string(e.fleet.view.event_loss);
  f["router.max_blocks"] = std::to_string(e.fleet.view.max_blocks);
  f["router.ttl_s"] = std::to_string(e.fleet.view.ttl_s);
  f["router.cpu_tier_weight"] = std::to_string(e.fleet.view.cpu_tier_weight);
  f["router.storage_tier_weight"] = std::to_string(e.fleet.view.storage_tier_weight);
  const KvOffloadConfig& o = e.kv_offload;
  f["kv_offload.kv_offloading_size"] = std::to_string(o.kv_offloading_size_gib);
  f["kv_offload.store_threshold"] = std::to_string(o.store_threshold);
  f["kv_offload.offload_prompt_only"] = std::to_string(o.offload_prompt_only);
  f["kv_offload.slot_sizing"] = std::string(OffloadSlotSizingName(o.slot_sizing));
  f["kv_offload.load_bytes_per_s"] = std::to_string(o.cpu_load_bytes_per_s);
  f["kv_offload.store_bytes_per_s"] = std::to_string(o.cpu_store_bytes_per_s);
  std::string tiers;
  for (const SecondaryTierConfig& t : o.secondary_tiers) {
    tiers += t.type + "/" + std::to_string(t.capacity_bytes) + "/" +
             std::to_string(t.read_bytes_per_s) + "/" + std::to_string(t.write_bytes_per_s) +
             (t.shared ? "/shared" : "") + ";";
  }
  f["kv_offload.secondary_tiers"] = tiers;
  return f;
}

std::map<std::string, std::string> ModelFingerprint(const ModelSpec& m) {
  std::map<std::string, std::string> f;
  f["name"] = m.name;
  f["active_params"] = std::to_string(m.active_params);
  f["active_params_source"] = m.active_params_source;
  return f;
}

struct Outcome {
  absl::Status status;
  Json plan;                                  // KvPlanToJson plus "startup_check"
  std::map<std::string, std::string> config;  // engine fingerprint + "model." entries
};

Outcome Plan(const ModelSpec& model, const EngineConfig& engine, std::string_view policy) {
  Outcome out;
  out.config = EngineFingerprint(engine);
  for (const auto& [k, v] : ModelFingerprint(model)) out.config["model." + k] = v;
  auto plan = ResolveKvPlan(model, engine, policy);
  if (!plan.ok()) {
    out.status = plan.status();
    return out;
  }
  out.plan = Json::parse(KvPlanToJson(*plan).dump());
  out.plan["startup_check"] = Json::parse(StartupCheckToJson(plan->startup_check).dump());
  return out;
}

// What an entry must show against the base run.
struct Effect {
  enum Kind { kPlan, kConfig, kRejected, kDocumentation, kNotAnOverride } kind;
  std::string key;  // kPlan: the plan JSON key; kConfig: the fingerprint key; kRejected: text
};
Effect PlanKey(std::string key) { return {Effect::kPlan, std::move(key)}; }
Effect ConfigKey(std::string key) { return {Effect::kConfig, std::move(key)}; }
Effect Rejected(std::string why) { return {Effect::kRejected, std::move(why)}; }
Effect Doc() { return {Effect::kDocumentation, ""}; }
Effect NotAnOverride() { return {Effect::kNotAnOverride, ""}; }

void ExpectEffect(const std::string& what, const Outcome& base, const Outcome& changed,
                  const Effect& effect) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(base.status.ok()) << base.status;
  switch (effect.kind) {
    case Effect::kPlan:
      ASSERT_TRUE(changed.status.ok()) << changed.status;
      ASSERT_TRUE(base.plan.contains(effect.key)) << effect.key;
      EXPECT_NE(base.plan[effect.key], changed.plan[effect.key])
          << "plan field '" << effect.key << "' did not change";
      break;
    case Effect::kConfig:
      ASSERT_TRUE(changed.status.ok()) << changed.status;
      ASSERT_TRUE(base.config.count(effect.key)) << effect.key;
      EXPECT_NE(base.config.at(effect.key), changed.config.at(effect.key))
          << "configuration '" << effect.key << "' did not change";
      break;
    case Effect::kRejected:
      EXPECT_EQ(changed.status.code(), absl::StatusCode::kInvalidArgument) << changed.status;
      EXPECT_THAT(std::string(changed.status.message()), HasSubstr(effect.key));
      break;
    case Effect::kDocumentation:
      ASSERT_TRUE(changed.status.ok()) << changed.status;
      EXPECT_EQ(base.plan, changed.plan);
      break;
    case Effect::kNotAnOverride:
      break;
  }
}

// ---- Flags ----------------------------------------------------------------------------------

void CollectOptions(const CLI::App* app, std::set<std::string>& names) {
  for (const CLI::Option* opt : app->get_options()) {
    for (const std::string& l : opt->get_lnames()) names.insert(l);
  }
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    CollectOptions(sub, names);
  }
}

Outcome RunFlags(const std::string& flags) {
  CLI::App app;
  cli::ModelEngineOptions options;
  cli::AddModelEngineOptions(&app, &options);
  cli::AddFleetOptions(&app, &options.overrides);
  Outcome out;
  try {
    app.parse("--model kimi-k3-like --engine kimi-k3-dspark " + flags, false);
  } catch (const CLI::ParseError& e) {
    out.status = absl::InvalidArgumentError(e.what());
    return out;
  }
  auto loaded = cli::LoadModelAndEngine(options);
  if (!loaded.ok()) {
    out.status = loaded.status();
    return out;
  }
  return Plan(loaded->model, loaded->engine, "old");
}

TEST(EveryInputTest, EveryOverrideFlagTakesEffectOrIsRefused) {
  // Base: the PR #53007 case (hybrid MLA + KDA + SWA drafter, TP 4) under the old policy.
  const std::map<std::string, std::pair<std::string, Effect>> table = {
      {"help", {"", NotAnOverride()}},
      {"model", {"", NotAnOverride()}},
      {"engine", {"", NotAnOverride()}},
      {"block-size", {"--block-size 3072", PlanKey("primary_block_size")}},
      {"kv-cache-bytes", {"--kv-cache-bytes 34359738368", PlanKey("num_blocks")}},
      {"num-gpu-blocks", {"--num-gpu-blocks 1000", PlanKey("num_blocks")}},
      {"max-num-batched-tokens",
       {"--max-num-batched-tokens 2048", PlanKey("blocks_per_max_len_request")}},
      {"max-num-seqs", {"--max-num-seqs 16", ConfigKey("max_num_seqs")}},
      {"max-model-len", {"--max-model-len 65536", PlanKey("blocks_per_max_len_request")}},
      {"long-prefill-token-threshold",
       {"--long-prefill-token-threshold 512", ConfigKey("long_prefill_token_threshold")}},
      {"prefix-match-unit", {"--prefix-match-unit 64", PlanKey("hash_block_size")}},
      {"tensor-parallel-size", {"--tensor-parallel-size 8", PlanKey("groups")}},
      {"num-speculative-tokens", {"--num-speculative-tokens 0", PlanKey("scheduler_block_size")}},
      // eagle and dspark both drop the last matched block: the plan is the same.
      {"speculative-method", {"--speculative-method eagle", ConfigKey("speculative.method")}},
      {"disable-eagle-block-drop", {"--disable-eagle-block-drop true", PlanKey("groups")}},
      {"prefix-cache-retention-interval",
       {"--prefix-cache-retention-interval 0", PlanKey("prefix_cache_retention_interval")}},
      {"scheduler-reserve-full-isl",
       {"--scheduler-reserve-full-isl false", ConfigKey("scheduler_reserve_full_isl")}},
      {"kv-cache-dtype", {"--kv-cache-dtype fp8", PlanKey("groups")}},
      {"mamba-spec-boundary-states",
       {"--mamba-spec-boundary-states skipped", ConfigKey("mamba_spec_boundary_states")}},
      {"enable-prefix-caching",
       {"--enable-prefix-caching false", PlanKey("enable_prefix_caching")}},
      {"enable-chunked-prefill",
       {"--enable-chunked-prefill false", ConfigKey("enable_chunked_prefill")}},
      {"no-spec", {"--no-spec", PlanKey("scheduler_block_size")}},
      {"replicas", {"--replicas 2", ConfigKey("replicas")}},
      {"router", {"--router least_loaded", ConfigKey("router.name")}},
      {"overlap-weight", {"--overlap-weight 2", ConfigKey("router.overlap_weight")}},
      {"ttft-slo-ms", {"--ttft-slo-ms 500", ConfigKey("router.ttft_slo_ms")}},
      {"router-view", {"--router-view lossy", ConfigKey("router.view")}},
      {"kv-event-delay-ms", {"--kv-event-delay-ms 50", ConfigKey("router.event_delay_ms")}},
      {"kv-event-loss", {"--kv-event-loss 0.25", ConfigKey("router.event_loss")}},
      {"router-max-blocks", {"--router-max-blocks 1000", ConfigKey("router.max_blocks")}},
      {"router-ttl-s", {"--router-ttl-s 60", ConfigKey("router.ttl_s")}},
      {"kv-offloading-size",
       {"--kv-offloading-size 256", ConfigKey("kv_offload.kv_offloading_size")}},
      {"router-cpu-tier-weight",
       {"--router-cpu-tier-weight 0.5", ConfigKey("router.cpu_tier_weight")}},
      {"router-storage-tier-weight",
       {"--router-storage-tier-weight 0.5", ConfigKey("router.storage_tier_weight")}},
      {"kv-offload-store-threshold",
       {"--kv-offload-store-threshold 2", ConfigKey("kv_offload.store_threshold")}},
      {"kv-offload-prompt-only",
       {"--kv-offload-prompt-only false", ConfigKey("kv_offload.offload_prompt_only")}},
      {"kv-offload-slot-sizing",
       {"--kv-offload-slot-sizing largest_group", ConfigKey("kv_offload.slot_sizing")}},
      {"kv-offload-load-gbps",
       {"--kv-offload-load-gbps 50", ConfigKey("kv_offload.load_bytes_per_s")}},
      {"kv-offload-store-gbps",
       {"--kv-offload-store-gbps 50", ConfigKey("kv_offload.store_bytes_per_s")}},
  };
  CLI::App app;
  cli::ModelEngineOptions options;
  cli::AddModelEngineOptions(&app, &options);
  cli::AddFleetOptions(&app, &options.overrides);
  std::set<std::string> flags;
  CollectOptions(&app, flags);
  ASSERT_GT(flags.size(), 20u);
  const Outcome base = RunFlags("");
  for (const std::string& flag : flags) {
    auto it = table.find(flag);
    if (it == table.end()) {
      ADD_FAILURE() << "--" << flag << " has no entry in the walk: say what it changes";
      continue;
    }
    if (it->second.second.kind == Effect::kNotAnOverride) continue;
    ExpectEffect("--" + flag, base, RunFlags(it->second.first), it->second.second);
  }
  // A dtype or TP that cannot apply is refused, not ignored.
  ExpectEffect("--tensor-parallel-size 3", base, RunFlags("--tensor-parallel-size 3"),
               Rejected("cannot be split over tensor_parallel_size 3"));
}

// ---- Engine JSON fields -------------------------------------------------------------------

Json Preset(const std::string& kind, const std::string& name) {
  auto path = ResolvePresetPath(name, kind);
  EXPECT_TRUE(path.ok());
  auto text = ReadFileToString(*path);
  EXPECT_TRUE(text.ok());
  return Json::parse(*text);
}

Outcome RunEngine(const Json& engine_json, const std::string& model = "kimi-k3-like") {
  Outcome out;
  auto engine = ParseEngineJson(engine_json.dump(), "walk_engine.json");
  if (!engine.ok()) {
    out.status = engine.status();
    return out;
  }
  ModelLoadOptions options;
  options.tensor_parallel_size = engine->tensor_parallel_size;
  options.kv_dtype = engine->kv_cache_dtype;
  auto loaded = LoadModel(model, options);
  if (!loaded.ok()) {
    out.status = loaded.status();
    return out;
  }
  return Plan(*loaded, *engine, "old");
}

struct EngineEntry {
  Json before;  // merge patches on the kimi-k3-dspark preset
  Json after;
  Effect effect;
  std::string model = "kimi-k3-like";
};

// A secondary tier whose one object `tier` replaces {"capacity": 1000}.
EngineEntry SecondaryTierEntry(Json tier) {
  auto with = [](Json t) {
    return Json{{"kv_offloading_size", 1},
                {"kv_transfer_config",
                 {{"kv_connector_extra_config", {{"secondary_tiers", Json::array({t})}}}}}};
  };
  return {with({{"capacity", 1000}}), with(std::move(tier)),
          ConfigKey("kv_offload.secondary_tiers")};
}

TEST(EveryInputTest, EveryEngineFieldTakesEffectOrIsRefused) {
  const Json none = Json::object();
  auto backend = [](Json object) { return Json{{"backends", {{"sliding_window", object}}}}; };
  const std::map<std::string, EngineEntry> table = {
      {"block_size", {none, {{"block_size", 3072}}, PlanKey("primary_block_size")}},
      {"backend",
       {{{"backends", {{"sliding_window", nullptr}}}},
        {{"backend", "FLASHINFER"}, {"backends", {{"sliding_window", nullptr}}}},
        PlanKey("groups")}},
      {"backends", {none, backend("FLASHINFER"), PlanKey("groups")}},
      {"kv_cache_bytes", {none, {{"kv_cache_bytes", int64_t{1} << 35}}, PlanKey("num_blocks")}},
      {"num_gpu_blocks", {none, {{"num_gpu_blocks", 1000}}, PlanKey("num_blocks")}},
      {"max_num_batched_tokens",
       {none, {{"max_num_batched_tokens", 2048}}, PlanKey("blocks_per_max_len_request")}},
      {"max_num_seqs", {none, {{"max_num_seqs", 16}}, ConfigKey("max_num_seqs")}},
      {"max_model_len", {none, {{"max_model_len", 65536}}, PlanKey("blocks_per_max_len_request")}},
      {"long_prefill_token_threshold",
       {none, {{"long_prefill_token_threshold", 512}}, ConfigKey("long_prefill_token_threshold")}},
      {"prefix_match_unit", {none, {{"prefix_match_unit", 64}}, PlanKey("hash_block_size")}},
      {"enable_prefix_caching",
       {none, {{"enable_prefix_caching", false}}, PlanKey("enable_prefix_caching")}},
      {"enable_chunked_prefill",
       {none, {{"enable_chunked_prefill", false}}, ConfigKey("enable_chunked_prefill")}},
      {"scheduler_reserve_full_isl",
       {none, {{"scheduler_reserve_full_isl", false}}, ConfigKey("scheduler_reserve_full_isl")}},
      {"prefix_cache_retention_interval",
       {none,
        {{"prefix_cache_retention_interval", 0}},
        PlanKey("prefix_cache_retention_interval")}},
      {"disable_hybrid_kv_cache_manager",
       {none, {{"disable_hybrid_kv_cache_manager", true}}, PlanKey("groups")}},
      {"mamba_cache_mode",
       {none, {{"mamba_cache_mode", "all"}}, PlanKey("blocks_per_max_len_request")}},
      {"mamba_spec_boundary_states",
       {none,
        {{"mamba_spec_boundary_states", "skipped"}},
        ConfigKey("mamba_spec_boundary_states")}},
      {"kv_cache_dtype", {none, {{"kv_cache_dtype", "fp8"}}, PlanKey("groups")}},
      {"tensor_parallel_size", {none, {{"tensor_parallel_size", 8}}, PlanKey("groups")}},
      {"decode_context_parallel_size",
       {none, {{"decode_context_parallel_size", 2}}, PlanKey("scheduler_block_size")}},
      {"skip_page_size_padded", {none, {{"skip_page_size_padded", 40000}}, PlanKey("groups")}},
      {"speculative", {none, {{"speculative", nullptr}}, PlanKey("scheduler_block_size")}},
      {"cost_model", {none, {{"cost_model", {{"gpu", "h100"}}}}, ConfigKey("cost_model.gpu")}},
      {"replicas", {none, {{"replicas", 2}}, ConfigKey("replicas")}},
      {"router", {none, {{"router", "least_loaded"}}, ConfigKey("router.name")}},
      {"description", {none, {{"description", "changed"}}, Doc()}},
      {"backend.name",
       {backend({{"name", "FLASH_ATTN"}}), backend({{"name", "FLASHINFER"}}), PlanKey("groups")}},
      {"backend.kernel_block_sizes",
       {backend({{"name", "MINE"}, {"kernel_block_sizes", {16}}}),
        backend({{"name", "MINE"}, {"kernel_block_sizes", {32}}}), PlanKey("groups")}},
      // The preference matters where no mamba alignment sets the block (docs/semantics.md §4).
      {"backend.preferred_block_size",
       {Json{{"backends", {{"full_attention", {{"name", "FLASH_ATTN"}}}}}},
        Json{{"backends",
              {{"full_attention", {{"name", "FLASH_ATTN"}, {"preferred_block_size", 32}}}}}},
        PlanKey("primary_block_size"), "llama-3.1-8b"}},
      {"speculative.method",
       {none, {{"speculative", {{"method", "draft_model"}}}}, PlanKey("groups")}},
      {"speculative.num_speculative_tokens",
       {none,
        {{"speculative", {{"num_speculative_tokens", 2}, {"acceptance", {{"rates", {0.8, 0.6}}}}}}},
        ConfigKey("speculative.num_speculative_tokens")}},
      // The former knob is refused, naming the one that replaced it.
      {"speculative.eagle_block_drop",
       {none,
        {{"speculative", {{"eagle_block_drop", false}}}},
        Rejected("replaced by vLLM's speculative.disable_eagle_block_drop")}},
      {"speculative.disable_eagle_block_drop",
       {none, {{"speculative", {{"disable_eagle_block_drop", true}}}}, PlanKey("groups")}},
      {"speculative.acceptance",
       {none,
        {{"speculative", {{"acceptance", {{"model", "geometric"}, {"rates", {0.7}}}}}}},
        ConfigKey("speculative.acceptance.model")}},
      {"speculative.acceptance.model",
       {none,
        {{"speculative", {{"acceptance", {{"model", "trace"}}}}}},
        ConfigKey("speculative.acceptance.model")}},
      {"speculative.acceptance.rates",
       {none,
        {{"speculative", {{"acceptance", {{"rates", {0.9, 0.5, 0.1}}}}}}},
        ConfigKey("speculative.acceptance.rates")}},
      {"speculative.acceptance.histogram",
       {none,
        {{"speculative", {{"acceptance", {{"model", "empirical"}, {"histogram", {1, 1, 1, 1}}}}}}},
        ConfigKey("speculative.acceptance.histogram")}},
      {"cost_model.kind",
       {none,
        {{"cost_model", {{"kind", "table"}, {"table", "t.csv"}}}},
        ConfigKey("cost_model.kind")}},
      {"cost_model.gpu", {none, {{"cost_model", {{"gpu", "h100"}}}}, ConfigKey("cost_model.gpu")}},
      {"cost_model.table",
       {none, {{"cost_model", {{"table", "t.csv"}}}}, ConfigKey("cost_model.table")}},
      {"router.name", {none, {{"router", {{"name", "least_loaded"}}}}, ConfigKey("router.name")}},
      {"router.overlap_weight",
       {none, {{"router", {{"overlap_weight", 2.0}}}}, ConfigKey("router.overlap_weight")}},
      {"router.ttft_slo_ms",
       {none, {{"router", {{"ttft_slo_ms", 500.0}}}}, ConfigKey("router.ttft_slo_ms")}},
      {"router.view", {none, {{"router", {{"view", "delayed"}}}}, ConfigKey("router.view")}},
      {"router.event_delay_ms",
       {none, {{"router", {{"event_delay_ms", 50.0}}}}, ConfigKey("router.event_delay_ms")}},
      {"router.event_loss",
       {none, {{"router", {{"event_loss", 0.5}}}}, ConfigKey("router.event_loss")}},
      {"router.max_blocks",
       {none, {{"router", {{"max_blocks", 1000}}}}, ConfigKey("router.max_blocks")}},
      {"router.ttl_s", {none, {{"router", {{"ttl_s", 60.0}}}}, ConfigKey("router.ttl_s")}},
      {"router.cpu_tier_weight",
       {none, {{"router", {{"cpu_tier_weight", 0.5}}}}, ConfigKey("router.cpu_tier_weight")}},
      {"router.storage_tier_weight",
       {none,
        {{"router", {{"storage_tier_weight", 0.5}}}},
        ConfigKey("router.storage_tier_weight")}},
      {"kv_offloading_size",
       {none, {{"kv_offloading_size", 256}}, ConfigKey("kv_offload.kv_offloading_size")}},
      {"kv_transfer_config",
       {none,
        {{"kv_transfer_config", {{"kv_connector_extra_config", {{"store_threshold", 2}}}}}},
        ConfigKey("kv_offload.store_threshold")}},
      {"kv_transfer_config.kv_connector",
       {none,
        {{"kv_transfer_config", {{"kv_connector", "LMCacheConnectorV1"}}}},
        Rejected("is not simulated")}},
      {"kv_transfer_config.kv_role",
       {none, {{"kv_transfer_config", {{"kv_role", "kv_producer"}}}}, Rejected("kv_both")}},
      {"kv_transfer_config.kv_connector_extra_config",
       {none,
        {{"kv_transfer_config", {{"kv_connector_extra_config", {{"store_threshold", 3}}}}}},
        ConfigKey("kv_offload.store_threshold")}},
      {"kv_transfer_config.kv_connector_extra_config.store_threshold",
       {none,
        {{"kv_transfer_config", {{"kv_connector_extra_config", {{"store_threshold", 2}}}}}},
        ConfigKey("kv_offload.store_threshold")}},
      {"kv_transfer_config.kv_connector_extra_config.offload_prompt_only",
       {none,
        {{"kv_transfer_config", {{"kv_connector_extra_config", {{"offload_prompt_only", false}}}}}},
        ConfigKey("kv_offload.offload_prompt_only")}},
      {"kv_transfer_config.kv_connector_extra_config.eviction_policy",
       {none,
        {{"kv_transfer_config", {{"kv_connector_extra_config", {{"eviction_policy", "arc"}}}}}},
        Rejected("is not simulated")}},
      {"kv_transfer_config.kv_connector_extra_config.secondary_tiers",
       {{{"kv_offloading_size", 1}},
        {{"kv_transfer_config",
          {{"kv_connector_extra_config", {{"secondary_tiers", {{{"capacity", 1000}}}}}}}}},
        ConfigKey("kv_offload.secondary_tiers")}},
      {"secondary_tier.type", SecondaryTierEntry({{"capacity", 1000}, {"type", "obj"}})},
      {"secondary_tier.capacity", SecondaryTierEntry({{"capacity", 2000}})},
      {"secondary_tier.read_gbps", SecondaryTierEntry({{"capacity", 1000}, {"read_gbps", 1}})},
      {"secondary_tier.write_gbps", SecondaryTierEntry({{"capacity", 1000}, {"write_gbps", 1}})},
      {"secondary_tier.shared", SecondaryTierEntry({{"capacity", 1000}, {"shared", true}})},
      {"kv_offload_link",
       {none,
        {{"kv_offload_link", {{"load_gbps", 50}}}},
        ConfigKey("kv_offload.load_bytes_per_s")}},
      {"kv_offload_link.load_gbps",
       {none,
        {{"kv_offload_link", {{"load_gbps", 50}}}},
        ConfigKey("kv_offload.load_bytes_per_s")}},
      {"kv_offload_link.store_gbps",
       {none,
        {{"kv_offload_link", {{"store_gbps", 50}}}},
        ConfigKey("kv_offload.store_bytes_per_s")}},
      {"kv_offload_link.slot_sizing",
       {none,
        {{"kv_offload_link", {{"slot_sizing", "largest_group"}}}},
        ConfigKey("kv_offload.slot_sizing")}},
  };
  const Json preset = Preset("engines", "kimi-k3-dspark");
  int walked = 0;
  for (const ConfigObjectFields& object : EngineJsonFields()) {
    for (std::string_view field : object.fields) {
      const std::string name = object.path.empty()
                                   ? std::string(field)
                                   : absl::StrCat(AbslView(object.path), ".", AbslView(field));
      auto it = table.find(name);
      if (it == table.end()) {
        ADD_FAILURE() << "engine field '" << name << "' has no entry in the walk";
        continue;
      }
      ++walked;
      const EngineEntry& e = it->second;
      Json before = preset, after = preset;
      before.merge_patch(e.before);
      after.merge_patch(e.before);
      after.merge_patch(e.after);
      ExpectEffect("engine field " + name, RunEngine(before, e.model), RunEngine(after, e.model),
                   e.effect);
    }
  }
  EXPECT_EQ(walked, static_cast<int>(table.size())) << "entries for fields that do not exist";
  // A misspelt field is refused, not ignored.
  Json typo = preset;
  typo["max_num_seq"] = 16;
  ExpectEffect("engine field max_num_seq", RunEngine(preset), RunEngine(typo),
               Rejected("field 'max_num_seq': unknown field"));
}

// ---- Model JSON fields --------------------------------------------------------------------

Outcome RunModel(const Json& model_json, int tp, const std::string& engine_name) {
  Outcome out;
  auto engine = LoadEngine(engine_name);
  EXPECT_TRUE(engine.ok());
  engine->tensor_parallel_size = tp;
  ModelLoadOptions options;
  options.tensor_parallel_size = tp;
  auto model = ParseModelJson(model_json.dump(), "walk_model.json", options);
  if (!model.ok()) {
    out.status = model.status();
    return out;
  }
  return Plan(*model, *engine, "old");
}

struct ModelEntry {
  Json before;
  Json after;
  Effect effect;
  int tp = 1;
  std::string engine = "h200-mtp";
};

Json Layers(std::vector<Json> layers) {
  return Json{{"name", "walk"}, {"active_params", 1e9}, {"layers", layers}};
}

TEST(EveryInputTest, EveryModelFieldTakesEffectOrIsRefused) {
  const Json full = {
      {"kind", "full_attention"}, {"count", 4}, {"num_kv_heads", 8}, {"head_size", 128}};
  const Json mla = {{"kind", "mla"}, {"count", 4}, {"kv_lora_rank", 512}, {"qk_rope_head_dim", 64}};
  const Json mamba = {{"kind", "mamba"}, {"count", 4}, {"state_bytes", 1 << 20}};
  auto with = [](Json layer, const Json& patch) {
    layer.merge_patch(patch);
    return layer;
  };
  auto top = [&](const Json& patch) {
    Json m = Layers({full});
    m.merge_patch(patch);
    return m;
  };
  const std::map<std::string, ModelEntry> table = {
      {"name", {Layers({full}), top({{"name", "other"}}), ConfigKey("model.name")}},
      {"active_params",
       {Layers({full}), top({{"active_params", 2e9}}), ConfigKey("model.active_params")}},
      {"active_params_source",
       {Layers({full}), top({{"active_params_source", "card"}}),
        ConfigKey("model.active_params_source")}},
      {"tensor_parallel_size",
       {Layers({full}), top({{"tensor_parallel_size", 2}}), PlanKey("groups"), /*tp=*/2}},
      {"layers", {Layers({full}), Layers({full, full}), PlanKey("groups")}},
      {"description", {Layers({full}), top({{"description", "x"}}), Doc()}},
      {"notes", {Layers({full}), top({{"notes", "x"}}), Doc()}},
      {"source", {Layers({full}), top({{"source", "x"}}), Doc()}},
      {"layers[].kind",
       {Layers({full}),
        Layers({with(full, {{"kind", "sliding_window"}, {"sliding_window", 1024}})}),
        PlanKey("groups")}},
      {"layers[].count", {Layers({full}), Layers({with(full, {{"count", 8}})}), PlanKey("groups")}},
      {"layers[].num_kv_heads",
       {Layers({full}), Layers({with(full, {{"num_kv_heads", 4}})}), PlanKey("groups")}},
      {"layers[].head_size",
       {Layers({full}), Layers({with(full, {{"head_size", 64}})}), PlanKey("groups")}},
      {"layers[].head_size_v",
       {Layers({full}), Layers({with(full, {{"head_size_v", 64}})}), PlanKey("groups")}},
      {"layers[].kv_lora_rank",
       {Layers({mla}), Layers({with(mla, {{"kv_lora_rank", 256}})}), PlanKey("groups")}},
      {"layers[].qk_rope_head_dim",
       {Layers({mla}), Layers({with(mla, {{"qk_rope_head_dim", 128}})}), PlanKey("groups")}},
      {"layers[].bytes_per_token",
       {Layers({full}),
        Layers({{{"kind", "full_attention"}, {"count", 4}, {"bytes_per_token", 1000}}}),
        PlanKey("groups")}},
      {"layers[].sliding_window",
       {Layers({full, with(full, {{"kind", "sliding_window"}, {"sliding_window", 1024}})}),
        Layers({full, with(full, {{"kind", "sliding_window"}, {"sliding_window", 4096}})}),
        PlanKey("groups")}},
      {"layers[].attention_chunk_size",
       {Layers({full, with(full, {{"kind", "chunked_local"}, {"attention_chunk_size", 8192}})}),
        Layers({full, with(full, {{"kind", "chunked_local"}, {"attention_chunk_size", 2048}})}),
        PlanKey("groups")}},
      {"layers[].state_bytes",
       {Layers({full, mamba}), Layers({full, with(mamba, {{"state_bytes", 1 << 21}})}),
        PlanKey("groups")}},
      // Checked only when TP splits the state: 3 heads cannot be split over 2 ranks.
      {"layers[].num_heads",
       {Layers({full, mamba}), Layers({full, with(mamba, {{"num_heads", 3}})}),
        Rejected("3 state heads cannot be split over tensor_parallel_size 2"), /*tp=*/2}},
      {"layers[].kv_dtype",
       {Layers({full}), Layers({with(full, {{"kv_dtype", "fp8"}})}), PlanKey("groups")}},
      {"layers[].drafter",
       {Layers({full, full}), Layers({full, with(full, {{"drafter", true}})}), PlanKey("groups"), 1,
        "h200"}},
      {"layers[].description",
       {Layers({full}), Layers({with(full, {{"description", "x"}})}), Doc()}},
  };
  int walked = 0;
  for (const ConfigObjectFields& object : ModelJsonFields()) {
    for (std::string_view field : object.fields) {
      const std::string name = object.path.empty()
                                   ? std::string(field)
                                   : absl::StrCat(AbslView(object.path), ".", AbslView(field));
      auto it = table.find(name);
      if (it == table.end()) {
        ADD_FAILURE() << "model field '" << name << "' has no entry in the walk";
        continue;
      }
      ++walked;
      const ModelEntry& e = it->second;
      ExpectEffect("model field " + name, RunModel(e.before, e.tp, e.engine),
                   RunModel(e.after, e.tp, e.engine), e.effect);
    }
  }
  EXPECT_EQ(walked, static_cast<int>(table.size())) << "entries for fields that do not exist";
  // Fields that the layer's form would not read are refused, not ignored.
  ExpectEffect("kv_lora_rank on a full_attention layer", RunModel(Layers({full}), 1, "h200"),
               RunModel(Layers({with(full, {{"kv_lora_rank", 512}})}), 1, "h200"),
               Rejected("applies only to mla layers"));
  ExpectEffect("sliding_window on a full_attention layer", RunModel(Layers({full}), 1, "h200"),
               RunModel(Layers({with(full, {{"sliding_window", 512}})}), 1, "h200"),
               Rejected("applies only to sliding_window layers"));
  ExpectEffect("unknown top-level field", RunModel(Layers({full}), 1, "h200"),
               RunModel(top({{"kv_cache_dtype", "fp8"}}), 1, "h200"),
               Rejected("field 'kv_cache_dtype': unknown field"));
}

}  // namespace
}  // namespace prefixsim
