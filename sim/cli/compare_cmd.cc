// `prefixsim compare`: one trace replayed under several block-size policies in parallel threads,
// side by side with deltas against the first policy (docs/design.md §4.1).
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/policy.h"
#include "sim/cli/commands.h"
#include "sim/cli/exit_codes.h"
#include "sim/cli/html_page.h"
#include "sim/cli/interrupt.h"
#include "sim/cli/kv_events_flags.h"
#include "sim/cli/replay_common.h"
#include "sim/report/report.h"
#include "sim/run/option_flags.h"
#include "sim/util/atomic_file.h"
#include "sim/util/parallel_for.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {
namespace {

struct CompareCommandOptions {
  ReplayCliOptions replay;
  std::string policies = "old,new";
  std::string json_path;
  HtmlCliOptions html;
  KvEventsCliOptions kv_events;
};

// The --policies list. A policy twice would compare a run with itself, and both runs would write
// its --kv-events file.
absl::StatusOr<std::vector<std::string>> ParsePolicies(const std::string& list) {
  std::vector<std::string> policies = SplitCommaList(list);
  if (policies.empty()) return absl::InvalidArgumentError("--policies is empty");
  for (size_t i = 0; i < policies.size(); ++i) {
    if (std::find(policies.begin(), policies.begin() + i, policies[i]) != policies.begin() + i) {
      return absl::InvalidArgumentError(
          absl::StrCat("--policies: '", policies[i], "' is given twice"));
    }
  }
  return policies;
}

// One --kv-events output per policy (KvEventsFileFor), each written by its policy's thread; all
// null without --kv-events.
absl::StatusOr<std::vector<std::unique_ptr<KvEventsOutput>>> OpenKvEventsPerPolicy(
    const KvEventsCliOptions& options, const std::vector<std::string>& policies,
    const ReplayInputs& inputs) {
  std::vector<std::unique_ptr<KvEventsOutput>> outputs(inputs.plans.size());
  if (!options.enabled()) return outputs;
  PREFIXSIM_RETURN_IF_ERROR(CheckKvEventsFleetSize(inputs.loaded.engine));
  for (size_t i = 0; i < inputs.plans.size(); ++i) {
    PREFIXSIM_ASSIGN_OR_RETURN(
        outputs[i],
        KvEventsOutput::Open(options, KvEventsFileFor(options.file, policies[i]), inputs.plans[i]));
  }
  return outputs;
}

// Replays every policy on the --threads pool, with their fleets' replicas; each opens its own
// trace reader. The first error in policy order is the command's.
absl::StatusOr<std::vector<ReplayResult>> ReplayPolicies(
    const ReplayCliOptions& run, const ReplayInputs& inputs, bool keep_records,
    const std::vector<std::unique_ptr<KvEventsOutput>>& kv_events) {
  const ModelAndEngine& loaded = inputs.loaded;
  std::vector<std::optional<absl::StatusOr<ReplayResult>>> results(inputs.plans.size());
  ParallelFor(inputs.plans.size(), run.threads, [&](size_t i) {
    ReplayCliOptions policy_run = run;
    if (kv_events[i] != nullptr) policy_run.kv_event_sink = kv_events[i]->SinkFactory();
    results[i] = RunReplay(policy_run, loaded.model, loaded.engine, inputs.plans[i],
                           i == 0 ? "compare" : "", keep_records);
  });
  std::vector<ReplayResult> ok;
  for (size_t i = 0; i < results.size(); ++i) {
    PREFIXSIM_RETURN_IF_ERROR(results[i]->status());
    ok.push_back(*std::move(*results[i]));
    if (kv_events[i] != nullptr) PREFIXSIM_RETURN_IF_ERROR(kv_events[i]->Finish());
  }
  return ok;
}

// The measured cost model's split of the simulated step time (docs/cuda.md), one line; nothing
// under another cost model.
void PrintKernelTimeShares(const std::vector<ReplayResult>& results, std::ostream& out) {
  std::string shares;
  for (const ReplayResult& r : results) {
    if (r.step_time_ns <= 0) continue;
    absl::StrAppend(&shares, shares.empty() ? "" : ", ", r.policy, " ",
                    absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(r.kernel_time_ns) /
                                                  static_cast<double>(r.step_time_ns)));
  }
  if (!shares.empty()) {
    out << "kernel-time share of step time (measured cost model): " << shares << "\n";
  }
}

// The text comparison (unless --json - makes stdout the JSON's alone), the JSON and the HTML page.
absl::Status WriteComparisonOutputs(const CompareCommandOptions& options,
                                    const ReplayInputs& inputs,
                                    const std::vector<ReplayResult>& results, bool measured,
                                    std::ostream& stdout_stream) {
  if (options.json_path != "-") {
    stdout_stream << RunHeading(inputs.loaded, options.replay.trace)
                  << run::SpellAsFlags(ComparisonReportText(results));
    if (measured) PrintKernelTimeShares(results, stdout_stream);
  }
  if (!options.json_path.empty()) {
    ReportOptions report;
    report.include_wall_time = !options.replay.no_wall_time;
    PREFIXSIM_RETURN_IF_ERROR(
        WriteOutput(options.json_path, ComparisonReportJson(results, report), stdout_stream));
  }
  return WriteHtmlPage(options.html, options.replay, inputs.loaded, results, /*deltas=*/true,
                       "compare");
}

absl::Status RunCompareCommand(const CompareCommandOptions& options, CommandOutput& out) {
  InstallInterruptHandlers();
  PREFIXSIM_ASSIGN_OR_RETURN(const std::vector<std::string> policies,
                             ParsePolicies(options.policies));
  PREFIXSIM_ASSIGN_OR_RETURN(const ReplayInputs inputs,
                             LoadReplayInputs("compare", options.replay, policies,
                                              {{options.json_path, "--json"},
                                               {options.html.html_path, "--html"},
                                               {options.kv_events.file, "--kv-events"}},
                                              options.html, out.err));
  const bool measured = inputs.loaded.engine.cost_model.kind == "measured";
  ReplayCliOptions run = options.replay;
  run.skip_teardown = true;  // the command exits after these replays
  PREFIXSIM_ASSIGN_OR_RETURN(const std::vector<std::unique_ptr<KvEventsOutput>> kv_events,
                             OpenKvEventsPerPolicy(options.kv_events, policies, inputs));
  WarnAboutSettingsWithoutEffect(run, inputs.loaded.engine, inputs.plans.front());
  PREFIXSIM_ASSIGN_OR_RETURN(
      const std::vector<ReplayResult> results,
      ReplayPolicies(run, inputs, /*keep_records=*/!options.html.html_path.empty(), kv_events));
  PREFIXSIM_RETURN_IF_ERROR(WriteComparisonOutputs(options, inputs, results, measured, out.out));
  // Interrupted: the outputs above are whole and say "partial" where they are.
  out.exit_code = InterruptSignal() != 0 ? kExitInterrupted : kExitOk;
  return absl::OkStatus();
}

}  // namespace

void AddCompareCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<CompareCommandOptions>();
  auto* cmd = app.add_subcommand(
      "compare", "replay one trace under several block-size policies, side by side with deltas");
  AddReplayCliOptions(cmd, &options->replay);
  cmd->add_option("--policies", options->policies,
                  "comma-separated policies, the first is the baseline (registered: " +
                      absl::StrJoin(RegisteredPolicyNames(), ", ") + ")")
      ->capture_default_str();
  cmd->add_option("--json", options->json_path, "write the comparison JSON here (- = stdout)");
  AddHtmlCliOptions(cmd, &options->html);
  AddKvEventsCliOptions(cmd, &options->kv_events, /*with_zmq=*/false);
  SetCommandRun(cmd, "compare", ctx,
                [options](CommandOutput& out) { return RunCompareCommand(*options, out); });
}

}  // namespace prefixsim::cli
