#include "sim/cli/common.h"

#include <cmath>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "prefixsim/kv_plan.h"
#include "sim/cli/commands.h"
#include "sim/cli/exit_codes.h"
#include "sim/fleet/cache_view.h"
#include "sim/fleet/router.h"
#include "sim/run/option_flags.h"
#include "sim/util/byte_size.h"
#include "sim/util/did_you_mean.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {

CLI::Validator ByteSizeValidator() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        absl::StatusOr<int64_t> bytes = ParseByteSize(value, "");
        if (!bytes.ok()) return std::string(bytes.status().message());
        value = std::to_string(*bytes);
        return "";
      },
      /*validator_desc=*/"");
}

namespace {

CLI::Validator NumberAtLeast(bool positive) {
  return CLI::Validator(
      [positive](std::string& value) -> std::string {
        double x = 0;
        if (!absl::SimpleAtod(value, &x) || std::isnan(x)) return "'" + value + "' is not a number";
        if (positive ? x > 0 : x >= 0) return "";
        return "'" + value + "' is not " + (positive ? "positive" : "0 or more");
      },
      positive ? "NUMBER>0" : "NUMBER>=0");
}

}  // namespace

std::vector<std::string> SplitCommaList(std::string_view text) {
  std::vector<std::string> items;
  for (absl::string_view item : absl::StrSplit(AbslView(text), ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (!item.empty()) items.emplace_back(item);
  }
  return items;
}

CLI::Validator PositiveNumber() { return NumberAtLeast(true); }
CLI::Validator NonNegativeNumber() { return NumberAtLeast(false); }

void AddModelEngineOptions(CLI::App* cmd, ModelEngineOptions* options) {
  cmd->add_option("--model,-m", options->model,
                  "model JSON, HuggingFace config.json or model directory (its config.json), or "
                  "preset name in configs/models/")
      ->required();
  cmd->add_option("--engine,-e", options->engine, "engine JSON or preset name in configs/engines/")
      ->required();
  EngineOverrides& o = options->overrides;
  auto* g =
      cmd->add_option_group("engine overrides", "override numeric options of the engine JSON");
  g->add_option("--block-size", o.block_size, "primary block size (tokens)")
      ->check(PositiveNumber());
  g->add_option("--kv-cache-bytes", o.kv_cache_bytes,
                "KV cache memory: bytes, or a size with a unit (64GiB, 1.5TiB, 512MiB; KiB..TiB "
                "are powers of 1024, KB..TB powers of 1000)")
      ->type_name("SIZE")
      ->transform(ByteSizeValidator());
  g->add_option("--num-gpu-blocks", o.num_gpu_blocks, "KV blocks (replaces --kv-cache-bytes)")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            int64_t n = 0;
            if (absl::SimpleAtoi(value, &n) && n >= 2 && n <= kMaxNumBlocks) return "";
            return absl::StrCat("'", value, "' is not a block count in [2, ", kMaxNumBlocks, "]");
          },
          "INT"));
  g->add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "token budget per step")
      ->check(PositiveNumber());
  g->add_option("--max-num-seqs", o.max_num_seqs, "max running requests")->check(PositiveNumber());
  g->add_option("--max-model-len", o.max_model_len, "max tokens per request")
      ->check(PositiveNumber());
  g->add_option("--long-prefill-token-threshold", o.long_prefill_token_threshold,
                "cap on prefill tokens per request per step (0 = off)")
      ->check(NonNegativeNumber());
  g->add_option("--prefix-match-unit", o.prefix_match_unit, "hash block size override (tokens)")
      ->check(PositiveNumber());
  g->add_option("--tensor-parallel-size", o.tensor_parallel_size,
                "TP ranks: attention KV heads split over them (one per rank at least), MLA "
                "latent replicated, mamba states split; kv_cache_bytes stays per GPU")
      ->check(PositiveNumber());
  CLI::Option* num_speculative_tokens =
      g->add_option("--num-speculative-tokens", o.num_speculative_tokens,
                    "draft tokens per step (0 turns speculative decoding off)")
          ->check(NonNegativeNumber());
  g->add_option("--kv-cache-dtype", o.kv_cache_dtype,
                "KV dtype of every attention layer: auto (the model's), bf16, fp16, fp8, fp32");
  g->add_option("--mamba-spec-boundary-states", o.mamba_spec_boundary_states,
                "align-mode mamba states at block boundaries crossed inside a verify step: "
                "cached (vLLM) or skipped");
  CLI::Option* speculative_method = g->add_option("--speculative-method", o.speculative_method,
                                                  "eagle, eagle3, mtp, dspark, ...");
  g->add_option("--enable-prefix-caching", o.enable_prefix_caching, "true or false");
  g->add_option("--enable-chunked-prefill", o.enable_chunked_prefill, "true or false");
  g->add_option("--prefix-cache-retention-interval", o.prefix_cache_retention_interval,
                "checkpoints sliding-window and mamba groups keep: 0 (the replay boundary and "
                "shared-prefix junctions), N tokens (also every N-token segment end) or dense; "
                "unset: vLLM's default (dense for a hybrid model with an EAGLE-family drafter, "
                "else 0)");
  g->add_option("--scheduler-reserve-full-isl", o.scheduler_reserve_full_isl,
                "true or false: admit a waiting request only when blocks for its whole sequence "
                "fit (vLLM's default true)");
  g->add_option("--kv-offloading-size", o.kv_offloading_size,
                "GiB of CPU memory for offloaded KV blocks (vLLM's kv_offloading_size; 0 = off)");
  g->add_option("--kv-offload-store-threshold", o.kv_offload_store_threshold,
                "store a block in the CPU tier only after this many lookups (vLLM's "
                "store_threshold; 0 or 1 = always)");
  g->add_option("--kv-offload-prompt-only", o.kv_offload_prompt_only,
                "true or false: offload prompt blocks only (vLLM's offload_prompt_only, default "
                "true)");
  g->add_option("--kv-offload-slot-sizing", o.kv_offload_slot_sizing,
                "row_per_key (vLLM main: each (block, group) key takes one block of every group) "
                "or largest_group (PR #56953)");
  g->add_option("--kv-offload-load-gbps", o.kv_offload_load_gbps,
                "GB/s from CPU to GPU memory (default 25)");
  g->add_option("--kv-offload-store-gbps", o.kv_offload_store_gbps,
                "GB/s from GPU to CPU memory (default 25)");
  CLI::Option* disable_eagle_block_drop =
      g->add_option("--disable-eagle-block-drop", o.disable_eagle_block_drop,
                    "true or false: keep the last matched block of a prefix hit that the eagle, "
                    "eagle3, mtp and dspark methods drop (vLLM's default false)");
  g->add_flag("--no-spec", o.no_speculative, "turn speculative decoding off (drops drafter layers)")
      ->excludes(num_speculative_tokens)
      ->excludes(speculative_method)
      ->excludes(disable_eagle_block_drop);
}

void AddFleetOptions(CLI::App* cmd, EngineOverrides* o) {
  auto* g = cmd->add_option_group("fleet", "engine replicas behind a router");
  g->add_option("--replicas", o->replicas,
                "engine replicas behind the router, or 'auto': the smallest fleet that keeps up "
                "(default 1, or the engine JSON's \"replicas\")");
  g->add_option("--router", o->router,
                "router of the fleet: " + absl::StrJoin(fleet::RegisteredRouters(), ", ") +
                    " (default round_robin)");
  g->add_option("--overlap-weight", o->overlap_weight,
                "kv_aware routers: weight of the prompt tokens a replica must compute (default 1)")
      ->check(NonNegativeNumber());
  g->add_option(
      "--router-view", o->router_view,
      "how kv_aware routers see the caches: " + absl::StrJoin(fleet::RegisteredCacheViews(), ", ") +
          " (default exact; kv_aware_unaligned: attention_only)");
  g->add_option("--kv-event-delay-ms", o->kv_event_delay_ms,
                "--router-view delayed: how late each cache event reaches the router, in ms")
      ->check(NonNegativeNumber());
  g->add_option("--kv-event-loss", o->kv_event_loss,
                "--router-view lossy: the fraction of cache events the router never receives")
      ->check(NonNegativeNumber());
  g->add_option("--router-max-blocks", o->router_max_blocks,
                "--router-view approximate: the most prompt blocks the router remembers, "
                "above 0 (default: as many as the fleet's KV blocks)");
  g->add_option("--router-ttl-s", o->router_ttl_s,
                "--router-view approximate: forget blocks not routed for this many seconds, "
                "above 0 (default: never)");
  g->add_option("--router-cpu-tier-weight", o->router_cpu_tier_weight,
                "with offload tiers: what a token in a replica's CPU tier is worth to kv_aware "
                "beside one on its GPU (default 0.8, llm-d's)");
  g->add_option("--router-storage-tier-weight", o->router_storage_tier_weight,
                "with offload tiers: the same for a storage tier (default 0.3)");
  g->add_option("--ttft-slo-ms", o->ttft_slo_ms,
                "--replicas auto: p99 TTFT the fleet must hold, in ms (default 2000)")
      ->check(PositiveNumber());
}

int ReportError(std::string_view command, const absl::Status& status) {
  std::cerr << "prefixsim " << command << ": " << run::SpellAsFlags(StdView(status.message()))
            << "\n";
  return ExitCodeFor(status);
}

int RunCommand(std::string_view command, const CommandRun& run) {
  CommandOutput output{std::cout, std::cerr};
  const absl::Status status = run(output);
  if (!status.ok()) return ReportError(command, status);
  return output.exit_code;
}

void SetCommandRun(CLI::App* cmd, std::string_view command, CommandContext& ctx, CommandRun run) {
  cmd->callback([name = std::string(command), run = std::move(run), &ctx] {
    ctx.exit_code = RunCommand(name, run);
  });
}

}  // namespace prefixsim::cli
