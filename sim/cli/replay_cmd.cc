// `prefixsim replay`: one simulation of a trace served by one engine (docs/design.md §4.1, §4.5).
#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>

#include "absl/strings/str_join.h"
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
#include "sim/cost/cost_model.h"
#include "sim/report/report.h"
#include "sim/spec/acceptance_model.h"
#include "sim/util/atomic_file.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {

void AddReplayCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    ReplayCliOptions replay;
    std::string policy = "new";
    std::string json_path;
    std::string csv_path;
    HtmlCliOptions html;
    KvEventsCliOptions kv_events;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "replay",
      "replay a trace through one simulated vLLM engine: prefix-cache hit rate, alignment loss, "
      "latency");
  cmd->footer("Acceptance models (speculative.acceptance.model): " +
              absl::StrJoin(RegisteredAcceptanceModels(), ", ") +
              "\nCost models (cost_model.kind): " + absl::StrJoin(RegisteredCostModels(), ", ") +
              "; GPU presets: " + absl::StrJoin(GpuPresetNames(), ", "));
  AddReplayCliOptions(cmd, &options->replay);
  cmd->add_option("--policy,-p", options->policy,
                  "block-size policy: " + absl::StrJoin(RegisteredPolicyNames(), ", "))
      ->capture_default_str();
  cmd->add_option("--json", options->json_path, "write the JSON summary here (- = stdout)");
  cmd->add_option("--csv", options->csv_path, "write the per-request CSV here (- = stdout)");
  AddHtmlCliOptions(cmd, &options->html);
  AddKvEventsCliOptions(cmd, &options->kv_events, /*with_zmq=*/true);
  cmd->callback([options, &ctx] {
    InstallInterruptHandlers();
    // Outputs first: a path that cannot be written fails now, not after the whole replay.
    for (const auto& [path, flag] :
         {std::pair{&options->json_path, "--json"}, std::pair{&options->csv_path, "--csv"},
          std::pair{&options->html.html_path, "--html"},
          std::pair{&options->kv_events.file, "--kv-events"}}) {
      if (absl::Status s = CheckOutputFile(*path, flag); !s.ok()) {
        ctx.exit_code = ReportError("replay", s);
        return;
      }
    }
    bool has_prefix_identity = true;
    if (absl::Status s = CheckTraceInput(options->replay.trace, options->replay.trace_options,
                                         &has_prefix_identity);
        !s.ok()) {
      ctx.exit_code = ReportError("replay", s);
      return;
    }
    WarnIfNoPrefixIdentity("replay", options->replay.trace, has_prefix_identity);
    auto loaded = LoadModelAndEngine(options->replay.model_engine);
    if (!loaded.ok()) {
      ctx.exit_code = ReportError("replay", loaded.status());
      return;
    }
    for (const std::string& a : loaded->model.assumptions) {
      std::cerr << "prefixsim replay: assumption: " << a << "\n";
    }
    auto plan = ResolvePlanWarningOfSmallPools(loaded->model, loaded->engine, options->policy);
    if (!plan.ok()) {
      ctx.exit_code = ReportError("replay", plan.status());
      return;
    }
    if (absl::Status s = CheckHtmlOptions(options->html, *loaded, {options->policy}); !s.ok()) {
      ctx.exit_code = ReportError("replay", s);
      return;
    }
    // --csv without --html streams its rows as requests end (memory bounded by the requests in
    // flight, not the trace); --html needs every record in memory anyway.
    const bool stream_csv = !options->csv_path.empty() && options->html.html_path.empty();
    // "-" streams to stdout; a file is published whole (or not at all) by csv_file->Commit().
    std::unique_ptr<AtomicFileWriter> csv_file;
    std::ostream* csv_stream = nullptr;
    std::function<void(const RequestRecord&)> sink;
    if (stream_csv) {
      if (options->csv_path == "-") {
        csv_stream = &std::cout;
      } else {
        auto opened = AtomicFileWriter::Open(options->csv_path);
        if (!opened.ok()) {
          ctx.exit_code = ReportError("replay", opened.status());
          return;
        }
        csv_file = *std::move(opened);
        csv_stream = &csv_file->stream();
      }
      const EngineConfig& e = loaded->engine;
      const bool fleet = e.fleet.replicas > 1 || e.fleet.auto_replicas;
      WriteRequestsCsvHeader(fleet, *csv_stream);
      sink = [csv_stream, fleet](const RequestRecord& rec) {
        WriteRequestCsvRow(rec, fleet, *csv_stream);
      };
    }
    ReplayCliOptions run = options->replay;
    run.skip_teardown = true;  // the command exits after this replay
    std::unique_ptr<KvEventsOutput> kv_events;
    if (options->kv_events.enabled()) {
      const EngineConfig& e = loaded->engine;
      if (e.fleet.auto_replicas) {
        // The search replays several fleets; their events would interleave in one stream.
        ctx.exit_code = ReportError(
            "replay", absl::InvalidArgumentError(
                          "--kv-events needs a fixed fleet size; --replicas auto replays several"));
        return;
      }
      auto opened = KvEventsOutput::Open(options->kv_events, options->kv_events.file, *plan,
                                         std::max(1, e.fleet.replicas));
      if (!opened.ok()) {
        ctx.exit_code = ReportError("replay", opened.status());
        return;
      }
      kv_events = *std::move(opened);
      run.kv_event_sink = kv_events->SinkFactory();
    }
    WarnAboutSettingsWithoutEffect(run, loaded->engine, *plan);
    auto result = RunReplay(run, loaded->model, loaded->engine, *plan, "replay",
                            /*keep_records=*/!options->html.html_path.empty(), sink);
    if (!result.ok()) {
      ctx.exit_code = ReportError("replay", result.status());
      return;
    }
    if (kv_events != nullptr) {
      if (absl::Status s = kv_events->Finish(); !s.ok()) {
        ctx.exit_code = ReportError("replay", s);
        return;
      }
    }
    const bool wall = !options->replay.no_wall_time;
    // With --json - or --csv - stdout carries the machine-readable output only.
    if (options->json_path != "-" && options->csv_path != "-") {
      std::cout << "model " << loaded->model.name << "   engine " << loaded->engine.source
                << "   trace " << options->replay.trace << "\n"
                << SpellForCli(ReplayReportText(*result, {.include_wall_time = wall}));
    }
    if (!options->json_path.empty()) {
      ReportOptions report;
      report.include_wall_time = wall;
      absl::Status s = WriteOutput(options->json_path, ReplayReportJson(*result, report));
      if (!s.ok()) {
        ctx.exit_code = ReportError("replay", s);
        return;
      }
    }
    if (csv_file != nullptr) {
      absl::Status s = csv_file->Commit();
      if (!s.ok()) {
        ctx.exit_code = ReportError("replay", s);
        return;
      }
    } else if (csv_stream != nullptr) {
      csv_stream->flush();
    } else if (!options->csv_path.empty()) {
      std::ostringstream csv;
      WriteRequestsCsv(*result, csv);
      absl::Status s = WriteOutput(options->csv_path, csv.str());
      if (!s.ok()) {
        ctx.exit_code = ReportError("replay", s);
        return;
      }
    }
    {
      const std::vector<ReplayResult> one = {*std::move(result)};
      absl::Status s =
          WriteHtmlPage(options->html, options->replay, *loaded, one, /*deltas=*/false, "replay");
      if (!s.ok()) {
        ctx.exit_code = ReportError("replay", s);
        return;
      }
    }
    // Interrupted: the outputs above are whole and say "partial" where they are.
    ctx.exit_code = InterruptSignal() != 0 ? kExitInterrupted : kExitOk;
  });
}

}  // namespace prefixsim::cli
