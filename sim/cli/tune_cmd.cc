// `prefixsim tune`: search the KV plan of a model and engine for a trace (docs/tune.md). The search
// is the library's (sim/grid/tune.h); this file parses flags and writes what it returns.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/cli/commands.h"
#include "sim/cli/html_page.h"
#include "sim/cli/interrupt.h"
#include "sim/cli/replay_common.h"
#include "sim/grid/tune.h"
#include "sim/run/option_flags.h"
#include "sim/util/atomic_file.h"
#include "sim/util/parallel_for.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {
namespace {

// Plans the page's table shows.
constexpr size_t kHtmlRows = 30;

struct TuneCommandOptions {
  ReplayCliOptions replay;
  std::string objective = "hit";
  std::string slo;
  std::string policies;
  int budget = grid::TuneOptions{}.budget;
  int top = 10;
  int rounds = grid::TuneOptions{}.rounds;
  int eta = grid::TuneOptions{}.eta;
  int finalists = grid::TuneOptions{}.finalists;
  bool no_block_size = false;
  bool no_swa_block = false;
  bool no_prefix_match_unit = false;
  bool no_retention = false;
  int64_t trace_memory_mb = grid::TuneOptions{}.trace_memory_bytes >> 20;
  std::string state_path;
  std::string json_path;
  std::string write_engine;
  std::string write_policy;
  std::string write_scenario;
  std::string html_path;
};

// vLLM's flags for a plan's engine arguments (vLLM spells a field with dashes).
std::string VllmFlags(const grid::TuneCandidate& c) {
  if (c.vllm_args.empty()) return "none (the engine as given)";
  std::string flags;
  for (const auto& [field, value] : c.vllm_args) {
    std::string flag = field;
    std::replace(flag.begin(), flag.end(), '_', '-');
    absl::StrAppend(&flags, flags.empty() ? "" : " ", "--", flag, " ", value);
  }
  return flags;
}

// --slo "ttft_p99_ms=N": the one SLO the fleet sizing holds today.
absl::StatusOr<double> ParseSlo(const std::string& slo) {
  const std::vector<std::string> parts = absl::StrSplit(slo, '=');
  double ms = 0;
  if (parts.size() != 2 || parts[0] != "ttft_p99_ms" || !absl::SimpleAtod(parts[1], &ms) ||
      !(ms > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slo '", slo,
                     "': expected ttft_p99_ms=MILLISECONDS with a positive number (the p99 "
                     "time to first token the fleet must hold)"));
  }
  return ms;
}

absl::StatusOr<grid::TuneOptions> ToTuneOptions(const TuneCommandOptions& o) {
  grid::TuneOptions t;
  t.replay = o.replay;
  const std::optional<grid::TuneObjective> objective = grid::ParseTuneObjective(o.objective);
  if (!objective) {
    return absl::InvalidArgumentError(
        absl::StrCat("--objective '", o.objective, "': expected hit or replicas"));
  }
  t.objective = *objective;
  if (!o.slo.empty()) {
    PREFIXSIM_ASSIGN_OR_RETURN(t.ttft_slo_ms, ParseSlo(o.slo));
    if (t.objective != grid::TuneObjective::kReplicas) {
      return absl::InvalidArgumentError("--slo applies to --objective replicas only");
    }
  }
  if (o.budget < 1) return absl::InvalidArgumentError("--budget: at least 1");
  if (o.top < 1) return absl::InvalidArgumentError("--top: at least 1");
  if (o.trace_memory_mb < 0) return absl::InvalidArgumentError("--trace-memory-mb: at least 0");
  t.budget = o.budget;
  t.rounds = o.rounds;
  t.eta = o.eta;
  t.finalists = o.finalists;
  t.space.block_size = !o.no_block_size;
  t.space.sliding_window_block = !o.no_swa_block;
  t.space.prefix_match_unit = !o.no_prefix_match_unit;
  t.space.retention_interval = !o.no_retention;
  if (!o.policies.empty()) t.space.policies = SplitCommaList(o.policies);
  t.trace_memory_bytes = o.trace_memory_mb << 20;
  t.state_path = o.state_path;
  return t;
}

// The shown plans as a sweep scenario, with the policy files of its forced SWA blocks beside it.
absl::Status WriteScenario(const TuneCommandOptions& options, const grid::TuneOptions& tune,
                           const grid::TuneResult& result, CommandOutput& out) {
  const std::filesystem::path dir = std::filesystem::absolute(options.write_scenario).parent_path();
  std::set<int> written;
  for (size_t i = 0; i < result.candidates.size(); ++i) {
    const grid::TuneCandidate& c = result.candidates[i];
    if (static_cast<int>(i) >= options.top && !c.baseline) continue;  // not in the scenario
    const std::string policy = grid::TunedPolicyJson(c);
    if (policy.empty() || !written.insert(*c.choice.sliding_window_block).second) continue;
    PREFIXSIM_RETURN_IF_ERROR(
        WriteOutput((dir / absl::StrCat("swa", *c.choice.sliding_window_block, ".json")).string(),
                    policy, out.out));
  }
  return WriteOutput(options.write_scenario,
                     grid::TuneScenarioJson(tune, result, options.top, dir.string()).dump(2) + "\n",
                     out.out);
}

// The page: the search's section, then the recommended plan against the baselines as compare
// shows them (each replayed on the whole trace with its records; with objective replicas on the
// fleet the halving rounds used).
absl::Status WriteTunePage(const TuneCommandOptions& options, const grid::TuneResult& result) {
  PREFIXSIM_ASSIGN_OR_RETURN(const ModelAndEngine loaded,
                             LoadModelAndEngine(options.replay.model_engine));
  std::vector<const grid::TuneCandidate*> shown;
  for (const grid::TuneCandidate& c : result.candidates) {
    if (c.baseline) shown.push_back(&c);
  }
  const grid::TuneCandidate& best = result.candidates[result.best];
  if (!best.baseline) shown.push_back(&best);
  std::vector<std::optional<absl::StatusOr<ReplayResult>>> replays(shown.size());
  ParallelFor(shown.size(), options.replay.threads, [&](size_t i) {
    EngineConfig engine = grid::TunedEngine(loaded.engine, *shown[i]);
    engine.fleet.replicas = result.round_replicas;
    replays[i] = RunReplay(options.replay, loaded.model, engine, shown[i]->plan, "");
  });
  std::vector<ReplayResult> results;
  for (size_t i = 0; i < shown.size(); ++i) {
    PREFIXSIM_RETURN_IF_ERROR(replays[i]->status());
    results.push_back(*std::move(*replays[i]));
    results.back().policy = shown[i]->label;
  }
  const TuneFigures figures = grid::TuneFiguresOf(result, kHtmlRows);
  HtmlCliOptions html;
  html.html_path = options.html_path;
  return WriteHtmlPage(html, options.replay, loaded, results, /*deltas=*/true, "tune",
                       /*parity=*/nullptr, &figures);
}

// An interrupted search keeps the replays that finished in its --state file, if it has one.
std::string InterruptedMessage(const std::string& state_path) {
  return absl::StrCat("prefixsim tune: interrupted; ",
                      state_path.empty()
                          ? "give --state FILE to keep finished replays for the next run"
                          : absl::StrCat("the same command with --state ", state_path,
                                         " resumes from the replays that finished"));
}

absl::Status RunTuneCommand(const TuneCommandOptions& options, CommandOutput& out) {
  InstallInterruptHandlers();
  PREFIXSIM_ASSIGN_OR_RETURN(const grid::TuneOptions tune, ToTuneOptions(options));
  // Every output can be written before a search that may take minutes.
  for (const auto& [path, flag] : {std::pair{options.json_path, "--json"},
                                   {options.write_engine, "--write-engine"},
                                   {options.write_policy, "--write-policy"},
                                   {options.write_scenario, "--write-scenario"},
                                   {options.html_path, "--html"}}) {
    PREFIXSIM_RETURN_IF_ERROR(CheckOutputFile(path, flag));
  }
  const bool quiet = options.replay.no_progress;
  absl::StatusOr<grid::TuneResult> searched =
      grid::RunTune(tune, InterruptFlag(), [&](const std::string& line) {
        if (!quiet) out.err << line << "\n";
      });
  if (!searched.ok() && InterruptSignal() != 0) {
    out.err << InterruptedMessage(options.state_path) << "\n";
    out.exit_code = kExitInterrupted;
    return absl::OkStatus();
  }
  PREFIXSIM_RETURN_IF_ERROR(searched.status());
  const grid::TuneResult& result = *searched;
  if (options.json_path != "-") {
    out.out << run::SpellAsFlags(grid::TuneResultText(result, options.top))
            << "  vLLM flags: " << VllmFlags(result.candidates[result.best]) << "\n";
  }
  if (!options.json_path.empty()) {
    PREFIXSIM_RETURN_IF_ERROR(WriteOutput(
        options.json_path, grid::TuneResultJson(result, options.top).dump(2) + "\n", out.out));
  }
  const grid::TuneCandidate& best = result.candidates[result.best];
  if (!options.write_engine.empty()) {
    PREFIXSIM_ASSIGN_OR_RETURN(const std::string engine, grid::TunedEngineJson(tune, best));
    PREFIXSIM_RETURN_IF_ERROR(WriteOutput(options.write_engine, engine, out.out));
  }
  if (!options.write_policy.empty()) {
    const std::string policy = grid::TunedPolicyJson(best);
    if (policy.empty()) {
      out.err << "--write-policy: the recommended plan's SWA block is policy " << best.choice.policy
              << "'s choice; no policy file needed (use --policies " << best.choice.policy << ")\n";
    } else {
      PREFIXSIM_RETURN_IF_ERROR(WriteOutput(options.write_policy, policy, out.out));
    }
  }
  if (!options.write_scenario.empty()) {
    PREFIXSIM_RETURN_IF_ERROR(WriteScenario(options, tune, result, out));
  }
  if (!options.html_path.empty()) PREFIXSIM_RETURN_IF_ERROR(WriteTunePage(options, result));
  return absl::OkStatus();
}

}  // namespace

void AddTuneCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<TuneCommandOptions>();
  auto* cmd = app.add_subcommand(
      "tune",
      "search the KV plan (block sizes, match unit, retention) for a trace, rank it, and "
      "give the vLLM flags of the best");
  AddReplayCliOptions(cmd, &options->replay);
  cmd->add_option("--objective", options->objective,
                  "hit (hit rate at the engine's memory) or replicas (fewest replicas within "
                  "the TTFT SLO)")
      ->capture_default_str();
  cmd->add_option("--slo", options->slo,
                  "with --objective replicas: ttft_p99_ms=MS (default: the engine's "
                  "fleet.ttft_slo_ms)");
  cmd->add_option("--budget", options->budget,
                  "plans replayed at most, besides the baselines (the rest are ranked by the "
                  "cheap bound only)")
      ->capture_default_str();
  cmd->add_option("--top", options->top, "rows shown (the baselines always are)")
      ->capture_default_str();
  cmd->add_option("--rounds", options->rounds,
                  "successive halving: rounds on 1/eta^(rounds-1), ..., 1/eta, all of the trace")
      ->capture_default_str();
  cmd->add_option("--eta", options->eta, "each round keeps the better 1/eta of its plans")
      ->capture_default_str();
  cmd->add_option("--finalists", options->finalists,
                  "plans each round keeps at least (with --objective replicas: fleets sized)")
      ->capture_default_str();
  cmd->add_option("--policies", options->policies,
                  "registered policies to start from, comma-separated (default: all)");
  cmd->add_flag("--no-block-size", options->no_block_size, "keep the engine's block_size");
  cmd->add_flag("--no-swa-block", options->no_swa_block,
                "keep each policy's sliding-window block (no forced blocks)");
  cmd->add_flag("--no-prefix-match-unit", options->no_prefix_match_unit,
                "keep the engine's prefix_match_unit");
  cmd->add_flag("--no-retention", options->no_retention,
                "keep the engine's prefix_cache_retention_interval");
  cmd->add_option("--trace-memory-mb", options->trace_memory_mb,
                  "hold the parsed trace in memory up to this size (beyond it each replay "
                  "parses the file again)")
      ->capture_default_str();
  cmd->add_option("--state", options->state_path,
                  "resume file (JSON lines): finished replays are kept there and not run again");
  cmd->add_option("--json", options->json_path, "write the ranked table as JSON (- = stdout)");
  cmd->add_option("--write-engine", options->write_engine,
                  "write the recommended plan as an engine JSON that replay/compare accept");
  cmd->add_option("--write-policy", options->write_policy,
                  "write the recommended plan's SWA block as a policy file (compare --policies "
                  "FILE.json)");
  cmd->add_option("--html", options->html_path,
                  "write a page: the search, then the recommended plan against the baselines");
  cmd->add_option("--write-scenario", options->write_scenario,
                  "write the shown plans as a sweep scenario (one replay each; sweep --slurm "
                  "runs it), with their policy files beside it");
  SetCommandRun(cmd, "tune", ctx,
                [options](CommandOutput& out) { return RunTuneCommand(*options, out); });
}

}  // namespace prefixsim::cli
