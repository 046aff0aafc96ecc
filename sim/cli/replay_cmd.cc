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
#include "sim/cli/interrupt.h"
#include "sim/cli/kv_events_flags.h"
#include "sim/cli/replay_common.h"
#include "sim/cost/cost_model.h"
#include "sim/report/report.h"
#include "sim/run/option_flags.h"
#include "sim/spec/acceptance_model.h"
#include "sim/util/atomic_file.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {
namespace {

struct ReplayCommandOptions {
  ReplayCliOptions replay;
  std::string policy = "new";
  std::string json_path;
  std::string csv_path;
  HtmlCliOptions html;
  KvEventsCliOptions kv_events;
};

// The per-request CSV written row by row as requests end: memory bounded by the requests in
// flight, not the trace. "-" streams to stdout; a file is published whole (or not at all) by
// Commit(). Only without --html, which needs every record in memory anyway.
struct StreamedCsv {
  std::unique_ptr<AtomicFileWriter> file;
  std::ostream* stream = nullptr;                  // null: the CSV is not streamed
  std::function<void(const RequestRecord&)> sink;  // RunReplay's record sink
};

absl::StatusOr<StreamedCsv> OpenStreamedCsv(const ReplayCommandOptions& options,
                                            const EngineConfig& engine,
                                            std::ostream& stdout_stream) {
  StreamedCsv csv;
  if (options.csv_path.empty() || !options.html.html_path.empty()) return csv;
  if (options.csv_path == "-") {
    csv.stream = &stdout_stream;
  } else {
    PREFIXSIM_ASSIGN_OR_RETURN(csv.file, AtomicFileWriter::Open(options.csv_path));
    csv.stream = &csv.file->stream();
  }
  const RequestCsvLayout layout = RequestCsvLayout::For(engine);
  WriteRequestsCsvHeader(layout, *csv.stream);
  csv.sink = [stream = csv.stream, layout](const RequestRecord& rec) {
    WriteRequestCsvRow(rec, layout, *stream);
  };
  return csv;
}

// The --kv-events outputs of the run, or null without --kv-events.
absl::StatusOr<std::unique_ptr<KvEventsOutput>> OpenKvEvents(const KvEventsCliOptions& options,
                                                             const EngineConfig& engine,
                                                             const KvPlan& plan) {
  if (!options.enabled()) return nullptr;
  PREFIXSIM_RETURN_IF_ERROR(CheckKvEventsFleetSize(engine));
  return KvEventsOutput::Open(options, options.file, plan, std::max(1, engine.fleet.replicas));
}

// The CSV: committed or flushed when streamed, otherwise written whole from the records.
absl::Status FinishCsv(const ReplayCommandOptions& options, StreamedCsv& csv,
                       const ReplayResult& result, std::ostream& stdout_stream) {
  if (csv.file != nullptr) return csv.file->Commit();
  if (csv.stream != nullptr) {
    csv.stream->flush();
    return absl::OkStatus();
  }
  if (options.csv_path.empty()) return absl::OkStatus();
  std::ostringstream text;
  WriteRequestsCsv(result, text);
  return WriteOutput(options.csv_path, text.str(), stdout_stream);
}

// The text summary (unless --json - or --csv - make stdout the machine-readable output's alone),
// the JSON summary, the CSV and the HTML page.
absl::Status WriteReplayOutputs(const ReplayCommandOptions& options, const ModelAndEngine& loaded,
                                ReplayResult result, StreamedCsv& csv,
                                std::ostream& stdout_stream) {
  const bool wall = !options.replay.no_wall_time;
  if (options.json_path != "-" && options.csv_path != "-") {
    stdout_stream << RunHeading(loaded, options.replay.trace)
                  << run::SpellAsFlags(ReplayReportText(result, {.include_wall_time = wall}));
  }
  if (!options.json_path.empty()) {
    ReportOptions report;
    report.include_wall_time = wall;
    PREFIXSIM_RETURN_IF_ERROR(
        WriteOutput(options.json_path, ReplayReportJson(result, report), stdout_stream));
  }
  PREFIXSIM_RETURN_IF_ERROR(FinishCsv(options, csv, result, stdout_stream));
  const std::vector<ReplayResult> one = {std::move(result)};
  return WriteHtmlPage(options.html, options.replay, loaded, one, /*deltas=*/false, "replay");
}

absl::Status RunReplayCommand(const ReplayCommandOptions& options, CommandOutput& out) {
  InstallInterruptHandlers();
  PREFIXSIM_ASSIGN_OR_RETURN(const ReplayInputs inputs,
                             LoadReplayInputs("replay", options.replay, {options.policy},
                                              {{options.json_path, "--json"},
                                               {options.csv_path, "--csv"},
                                               {options.html.html_path, "--html"},
                                               {options.kv_events.file, "--kv-events"}},
                                              options.html, out.err));
  const ModelAndEngine& loaded = inputs.loaded;
  const KvPlan& plan = inputs.plans.front();
  PREFIXSIM_ASSIGN_OR_RETURN(StreamedCsv csv, OpenStreamedCsv(options, loaded.engine, out.out));
  ReplayCliOptions run = options.replay;
  run.skip_teardown = true;  // the command exits after this replay
  PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<KvEventsOutput> kv_events,
                             OpenKvEvents(options.kv_events, loaded.engine, plan));
  if (kv_events != nullptr) run.kv_event_sink = kv_events->SinkFactory();
  WarnAboutSettingsWithoutEffect(run, loaded.engine, plan);
  PREFIXSIM_ASSIGN_OR_RETURN(ReplayResult result,
                             RunReplay(run, loaded.model, loaded.engine, plan, "replay",
                                       /*keep_records=*/!options.html.html_path.empty(), csv.sink));
  if (kv_events != nullptr) PREFIXSIM_RETURN_IF_ERROR(kv_events->Finish());
  PREFIXSIM_RETURN_IF_ERROR(WriteReplayOutputs(options, loaded, std::move(result), csv, out.out));
  // Interrupted: the outputs above are whole and say "partial" where they are.
  out.exit_code = InterruptSignal() != 0 ? kExitInterrupted : kExitOk;
  return absl::OkStatus();
}

}  // namespace

void AddReplayCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<ReplayCommandOptions>();
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
  SetCommandRun(cmd, "replay", ctx,
                [options](CommandOutput& out) { return RunReplayCommand(*options, out); });
}

}  // namespace prefixsim::cli
