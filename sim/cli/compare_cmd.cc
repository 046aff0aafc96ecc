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
#include "sim/cli/input_checks.h"
#include "sim/cli/interrupt.h"
#include "sim/cli/kv_events_flags.h"
#include "sim/cli/option_flags.h"
#include "sim/cli/replay_common.h"
#include "sim/cost/measured.h"
#include "sim/report/report.h"
#include "sim/util/atomic_file.h"
#include "sim/util/parallel_for.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {

void AddCompareCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    ReplayCliOptions replay;
    std::string policies = "old,new";
    std::string json_path;
    HtmlCliOptions html;
    KvEventsCliOptions kv_events;
  };
  auto options = std::make_shared<Options>();
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
  cmd->callback([options, &ctx] {
    InstallInterruptHandlers();
    const std::vector<std::string> policies = SplitCommaList(options->policies);
    if (policies.empty()) {
      ctx.exit_code = ReportError("compare", absl::InvalidArgumentError("--policies is empty"));
      return;
    }
    // A policy twice compares a run with itself, and both would write its --kv-events file.
    for (size_t i = 0; i < policies.size(); ++i) {
      if (std::find(policies.begin(), policies.begin() + i, policies[i]) == policies.begin() + i) {
        continue;
      }
      ctx.exit_code =
          ReportError("compare", absl::InvalidArgumentError(absl::StrCat(
                                     "--policies: '", policies[i], "' is given twice")));
      return;
    }
    // Outputs first: a path that cannot be written fails now, not after the whole comparison.
    for (const auto& [path, flag] :
         {std::pair{&options->json_path, "--json"}, std::pair{&options->html.html_path, "--html"},
          std::pair{&options->kv_events.file, "--kv-events"}}) {
      if (absl::Status s = CheckOutputFile(*path, flag); !s.ok()) {
        ctx.exit_code = ReportError("compare", s);
        return;
      }
    }
    bool has_prefix_identity = true;
    if (absl::Status s = CheckTraceInput(options->replay.trace, options->replay.trace_options,
                                         &has_prefix_identity);
        !s.ok()) {
      ctx.exit_code = ReportError("compare", s);
      return;
    }
    WarnIfNoPrefixIdentity("compare", options->replay.trace, has_prefix_identity);
    auto loaded = LoadModelAndEngine(options->replay.model_engine);
    if (!loaded.ok()) {
      ctx.exit_code = ReportError("compare", loaded.status());
      return;
    }
    for (const std::string& a : loaded->model.assumptions) {
      std::cerr << "prefixsim compare: assumption: " << a << "\n";
    }
    std::vector<KvPlan> plans;
    for (const std::string& policy : policies) {
      auto plan = ResolvePlanWarningOfSmallPools(loaded->model, loaded->engine, policy);
      if (!plan.ok()) {
        ctx.exit_code = ReportError("compare", plan.status());
        return;
      }
      plans.push_back(*std::move(plan));
    }
    if (absl::Status s = CheckHtmlOptions(options->html, *loaded, policies); !s.ok()) {
      ctx.exit_code = ReportError("compare", s);
      return;
    }
    const bool measured = loaded->engine.cost_model.kind == "measured";
    // The policies run on the --threads pool, with their fleets' replicas; each opens its own
    // trace reader.
    std::vector<std::optional<absl::StatusOr<ReplayResult>>> results(plans.size());
    ReplayCliOptions run = options->replay;
    run.skip_teardown = true;  // the command exits after these replays
    // One event file per policy (KvEventsFileFor), each written by its policy's thread.
    std::vector<std::unique_ptr<KvEventsOutput>> kv_events(plans.size());
    if (options->kv_events.enabled()) {
      if (loaded->engine.fleet.auto_replicas) {
        ctx.exit_code = ReportError(
            "compare",
            absl::InvalidArgumentError(
                "--kv-events needs a fixed fleet size; --replicas auto replays several"));
        return;
      }
      for (size_t i = 0; i < plans.size(); ++i) {
        auto opened = KvEventsOutput::Open(
            options->kv_events, KvEventsFileFor(options->kv_events.file, policies[i]), plans[i]);
        if (!opened.ok()) {
          ctx.exit_code = ReportError("compare", opened.status());
          return;
        }
        kv_events[i] = *std::move(opened);
      }
    }
    WarnAboutSettingsWithoutEffect(run, loaded->engine, plans.front());
    ParallelFor(plans.size(), run.threads, [&](size_t i) {
      ReplayCliOptions policy_run = run;
      if (kv_events[i] != nullptr) policy_run.kv_event_sink = kv_events[i]->SinkFactory();
      results[i] =
          RunReplay(policy_run, loaded->model, loaded->engine, plans[i], i == 0 ? "compare" : "",
                    /*keep_records=*/!options->html.html_path.empty());
    });
    std::vector<ReplayResult> ok;
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i]->ok()) {
        ctx.exit_code = ReportError("compare", results[i]->status());
        return;
      }
      ok.push_back(*std::move(*results[i]));
      if (kv_events[i] != nullptr) {
        if (absl::Status s = kv_events[i]->Finish(); !s.ok()) {
          ctx.exit_code = ReportError("compare", s);
          return;
        }
      }
    }
    if (options->json_path != "-") {
      std::cout << "model " << loaded->model.name << "   engine " << loaded->engine.source
                << "   trace " << options->replay.trace << "\n"
                << SpellForCli(ComparisonReportText(ok));
      // The measured cost model's split of the simulated step time (docs/cuda.md).
      std::string shares;
      for (size_t i = 0; measured && i < ok.size(); ++i) {
        if (ok[i].step_time_ns > 0) {
          absl::StrAppend(
              &shares, shares.empty() ? "" : ", ", ok[i].policy, " ",
              absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(ok[i].kernel_time_ns) /
                                            static_cast<double>(ok[i].step_time_ns)));
        }
      }
      if (!shares.empty()) {
        std::cout << "kernel-time share of step time (measured cost model): " << shares << "\n";
      }
    }
    ReportOptions report;
    report.include_wall_time = !options->replay.no_wall_time;
    if (!options->json_path.empty()) {
      absl::Status s = WriteOutput(options->json_path, ComparisonReportJson(ok, report));
      if (!s.ok()) {
        ctx.exit_code = ReportError("compare", s);
        return;
      }
    }
    {
      absl::Status s =
          WriteHtmlPage(options->html, options->replay, *loaded, ok, /*deltas=*/true, "compare");
      if (!s.ok()) {
        ctx.exit_code = ReportError("compare", s);
        return;
      }
    }
    // Interrupted: the outputs above are whole and say "partial" where they are.
    ctx.exit_code = InterruptSignal() != 0 ? kExitInterrupted : kExitOk;
  });
}

}  // namespace prefixsim::cli
