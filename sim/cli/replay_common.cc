#include "sim/cli/replay_common.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "prefixsim/kv_cache_manager.h"
#include "sim/cli/html_page.h"
#include "sim/cli/input_checks.h"
#include "sim/cli/interrupt.h"
#include "sim/cli/trace_flags.h"
#include "sim/fleet/router.h"
#include "sim/util/atomic_file.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {
namespace {

// Whether the router registered as `name` reads --overlap-weight.
bool RouterWeighsOverlap(const std::string& name) {
  absl::StatusOr<std::unique_ptr<fleet::Router>> router = fleet::NewRouter(name, {});
  return router.ok() && (*router)->uses_overlap_weight();
}

}  // namespace

void AddReplayCliOptions(CLI::App* cmd, ReplayCliOptions* o) {
  cmd->add_option("--trace,-t", o->trace,
                  "trace file (" + absl::StrJoin(RegisteredTraceFormats(), ", ") +
                      "; .gz/.zst read directly)")
      ->required();
  AddModelEngineOptions(cmd, &o->model_engine);
  AddFleetOptions(cmd, &o->model_engine.overrides);
  auto* t = cmd->add_option_group("trace shaping");
  AddTraceOptionFlags(t, &o->trace_options);
  cmd->add_option("--seed", o->seed, "seed of the acceptance model (and trace sampling)")
      ->capture_default_str();
  cmd->add_option("--active-params", o->active_params,
                  "analytic cost model: active parameters per forward pass (default: estimated "
                  "from the layer count)")
      ->check(NonNegativeNumber());
  cmd->add_option("--hit-rate-window", o->hit_rate_window,
                  "requests in the window of the logged (recent) hit rate")
      ->capture_default_str()
      ->check(PositiveNumber());
  cmd->add_option("--check-invariants-every", o->check_invariants_every,
                  "check the KV cache's invariants after every Nth step (soak runs; 0 = never)")
      ->check(NonNegativeNumber());
  cmd->add_flag("--check-invariants", o->check_invariants,
                "run the KV cache invariant checker after every operation (slow)");
  cmd->add_flag("--no-wall-time", o->no_wall_time,
                "omit wall_time_s so that reports of equal runs are byte-identical");
  cmd->add_flag("--no-progress", o->no_progress, "no progress lines on stderr");
  cmd->add_option("--max-preemptions-without-finish", o->max_preemptions_without_finish,
                  "stop a thrashing replay (exit 1) once a replica preempts this many times "
                  "without finishing a request (0 = never)")
      ->capture_default_str()
      ->check(NonNegativeNumber());
  cmd->add_option("--max-steps-without-finish", o->max_steps_without_finish,
                  "stop a replay (exit 1) once a replica runs this many steps without finishing "
                  "a request (0 = never; default 2 x max_model_len + 10000)")
      ->check(NonNegativeNumber());
  CLI::Option* no_miss_causes = cmd->add_flag(
      "--no-miss-causes", o->no_miss_causes,
      "do not split each admission's tokens into miss causes (saves the attribution's "
      "time and its per-prefix history)");
  cmd->add_option("--miss-causes-memory-mb", o->miss_causes_memory_mb,
                  "bound on what miss attribution remembers of prefixes computed and since lost "
                  "(at most about 32 bytes per block, split over the replicas; per policy in "
                  "compare); past it the oldest are forgotten and the report says how many (0 = "
                  "no bound)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->excludes(no_miss_causes);
  cmd->add_option("--threads", o->threads,
                  "threads a fleet's replicas step on between arrivals, shared with compare's "
                  "policies (default: cores, at most one per replica with work; measured on 2 "
                  "cores no slower than one thread, with or without miss causes; the reports and "
                  "--kv-events streams are the same for every count)")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            int n = 0;
            if (absl::SimpleAtoi(value, &n) && n >= 0) return "";
            return "'" + value + "' is not a thread count (0 or more; 0: the machine's cores)";
          },
          "INT>=0"));
  cmd->add_flag("--no-fast-path", o->no_fast_path,
                "run every KV cache call in full (the slow reference path; same results)");
}

absl::StatusOr<ReplayResult> RunReplay(const ReplayCliOptions& o, const ModelSpec& model,
                                       const EngineConfig& engine, const KvPlan& plan,
                                       const std::string& progress_label, bool keep_records,
                                       std::function<void(const RequestRecord&)> record_sink) {
  std::function<void(const ReplayProgress&)> progress;
  // Progress on stderr once the run has lasted a second: on a terminal one line rewritten in
  // place; elsewhere (a CI log, a file) a full line every 10 s, so a long run is seen alive.
  const bool show_progress = !o.no_progress && !progress_label.empty();
  const bool terminal = isatty(STDERR_FILENO);
  const double interval_s = terminal ? 0.2 : 10.0;
  bool printed = false;
  const auto start = std::chrono::steady_clock::now();
  double last_print = 0;
  if (show_progress) {
    progress = [&](const ReplayProgress& p) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (elapsed < 1.0 || (!p.done && elapsed - last_print < interval_s)) return;
      if (p.done && !terminal && !printed) return;  // a short run leaves a log untouched
      last_print = elapsed;
      printed = true;
      std::fprintf(stderr, "%s%s: %lld requests read, %lld done, %.0f s simulated, %.1f s%s",
                   terminal ? "\r" : "", progress_label.c_str(),
                   static_cast<long long>(p.requests_read),
                   static_cast<long long>(p.requests_finished),
                   static_cast<double>(p.sim_time_ns) / 1e9, elapsed, terminal ? "   " : "\n");
      std::fflush(stderr);
    };
  }
  // The KV manager says nothing itself (docs/design.md §2: only the CLI prints).
  if (const std::string warning = PrefixCachingDisabledWarning(plan); !warning.empty()) {
    std::fprintf(stderr, "%s\n", warning.c_str());
  }
  absl::StatusOr<ReplayResult> result =
      run::RunReplay(o, model, engine, plan, InterruptFlag(), std::move(progress), keep_records,
                     std::move(record_sink));
  if (printed && terminal) std::fprintf(stderr, "\n");
  return result;
}

void WarnAboutSettingsWithoutEffect(const ReplayCliOptions& o, const EngineConfig& engine,
                                    const KvPlan& plan) {
  // A block size the plan could not use (mamba alignment raises it, as vLLM does with a log line).
  if (engine.block_size && plan.primary_block_size != *engine.block_size) {
    std::fprintf(stderr,
                 "prefixsim: warning: block size %d (--block-size or the engine JSON's block_size) "
                 "is not the plan's: its attention block size is %lld (prefixsim resolve says "
                 "why)\n",
                 *engine.block_size, static_cast<long long>(plan.primary_block_size));
  }
  // Fleet flags that this run's fleet does not read: the report is right, but the flag was asked
  // for and did nothing.
  const EngineOverrides& asked = o.model_engine.overrides;
  const FleetConfig& fleet_config = engine.fleet;
  const bool one_replica = !fleet_config.auto_replicas && fleet_config.replicas == 1;
  if (one_replica && (asked.router || asked.router_view || asked.overlap_weight)) {
    const std::string flag = asked.router        ? "--router " + *asked.router
                             : asked.router_view ? "--router-view " + *asked.router_view
                                                 : "--overlap-weight";
    std::fprintf(stderr,
                 "prefixsim: warning: %s routes nothing on one replica; give --replicas N (or "
                 "auto) for a fleet\n",
                 flag.c_str());
  } else if (asked.overlap_weight && !RouterWeighsOverlap(fleet_config.router)) {
    std::vector<std::string> weighing;
    for (const std::string& name : fleet::RegisteredRouters()) {
      if (RouterWeighsOverlap(name)) weighing.push_back(name);
    }
    std::fprintf(stderr,
                 "prefixsim: warning: --overlap-weight does nothing with router %s (read by %s)\n",
                 fleet_config.router.c_str(), absl::StrJoin(weighing, ", ").c_str());
  }
  if (asked.ttft_slo_ms && !fleet_config.auto_replicas) {
    std::fprintf(stderr,
                 "prefixsim: warning: --ttft-slo-ms sizes --replicas auto and does nothing on a "
                 "fleet of a given size (%d %s)\n",
                 fleet_config.replicas, fleet_config.replicas == 1 ? "replica" : "replicas");
  }
}

absl::StatusOr<ReplayInputs> LoadReplayInputs(std::string_view command,
                                              const ReplayCliOptions& options,
                                              const std::vector<std::string>& policies,
                                              const std::vector<OutputFlag>& outputs,
                                              const HtmlCliOptions& html, std::ostream& err) {
  for (const OutputFlag& output : outputs) {
    PREFIXSIM_RETURN_IF_ERROR(CheckOutputFile(output.path, output.flag));
  }
  bool has_prefix_identity = true;
  PREFIXSIM_RETURN_IF_ERROR(
      CheckTraceInput(options.trace, options.trace_options, &has_prefix_identity));
  WarnIfNoPrefixIdentity(command, options.trace, has_prefix_identity);
  ReplayInputs inputs;
  PREFIXSIM_ASSIGN_OR_RETURN(inputs.loaded, LoadModelAndEngine(options.model_engine));
  for (const std::string& assumption : inputs.loaded.model.assumptions) {
    err << "prefixsim " << command << ": assumption: " << assumption << "\n";
  }
  for (const std::string& policy : policies) {
    PREFIXSIM_ASSIGN_OR_RETURN(KvPlan plan, ResolvePlanWarningOfSmallPools(
                                                inputs.loaded.model, inputs.loaded.engine, policy));
    inputs.plans.push_back(std::move(plan));
  }
  PREFIXSIM_RETURN_IF_ERROR(CheckHtmlOptions(html, inputs.loaded, policies));
  return inputs;
}

std::string RunHeading(const ModelAndEngine& loaded, const std::string& trace) {
  return absl::StrCat("model ", loaded.model.name, "   engine ", loaded.engine.source, "   trace ",
                      trace, "\n");
}

absl::Status WriteOutput(const std::string& path, std::string_view contents,
                         std::ostream& stdout_stream) {
  if (path == "-") {
    stdout_stream << contents;
    return absl::OkStatus();
  }
  return WriteFileAtomically(path, contents);
}

}  // namespace prefixsim::cli
