// `prefixsim parity`: the simulated engine next to a measured vLLM run of the same trace: the
// prefix-cache hit rate against vLLM's counters (two /metrics scrapes), and the simulated KV event
// stream against one vLLM recorded (docs/kv-events.md "Parity").
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "prefixsim/policy.h"
#include "sim/cli/commands.h"
#include "sim/cli/exit_codes.h"
#include "sim/cli/html_page.h"
#include "sim/cli/input_checks.h"
#include "sim/cli/interrupt.h"
#include "sim/cli/replay_common.h"
#include "sim/events/event_log.h"
#include "sim/events/event_recorder.h"
#include "sim/events/parity.h"
#include "sim/report/report.h"
#include "sim/run/option_flags.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {
namespace {

struct ParityCommandOptions {
  ReplayCliOptions replay;
  std::string policy = "new";
  std::vector<std::string> metrics;
  std::string events_path;
  bool json = false;
  HtmlCliOptions html;
};

// What the measured vLLM run gave: its hit rate (--vllm-metrics), its event stream
// (--vllm-kv-events), or both.
struct MeasuredSide {
  std::optional<events::MeasuredHitRate> hit_rate;
  std::vector<events::EventBatch> events;
};

// What the replay gave: the result and, with --vllm-kv-events, its event stream.
struct SimulatedSide {
  ReplayResult result;
  std::vector<events::EventBatch> events;
  double hit_rate() const {
    const PrefixCacheStats& s = result.prefix_cache;
    return s.queries > 0 ? static_cast<double>(s.hits) / static_cast<double>(s.queries) : 0;
  }
};

// The two event streams side by side (with --vllm-kv-events only).
struct EventComparison {
  events::EventDivergence divergence;
  std::vector<std::string> cannot_compare;  // what the comparison cannot say
};

absl::StatusOr<events::PromScrape> ReadProm(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(path + ": cannot open the metrics file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return events::ParsePromText(buffer.str(), path);
}

std::string Percent(double x) { return absl::StrFormat("%.2f%%", 100 * x); }

// Read before the replay, so that a malformed file fails before it.
absl::StatusOr<MeasuredSide> ReadMeasuredSide(const ParityCommandOptions& options) {
  MeasuredSide measured;
  if (!options.metrics.empty()) {
    auto before = ReadProm(options.metrics[0]);
    auto after = before.ok() ? ReadProm(options.metrics[1]) : before;
    if (!before.ok() || !after.ok()) return before.ok() ? after.status() : before.status();
    PREFIXSIM_ASSIGN_OR_RETURN(
        measured.hit_rate,
        events::MeasuredFromScrapes(*before, options.metrics[0], *after, options.metrics[1]));
  }
  if (!options.events_path.empty()) {
    PREFIXSIM_ASSIGN_OR_RETURN(measured.events, events::ReadEventLog(options.events_path));
  }
  return measured;
}

// Replays the trace, recording its KV events when there is a recorded stream to compare with.
absl::StatusOr<SimulatedSide> ReplaySimulatedSide(const ParityCommandOptions& options,
                                                  const ModelAndEngine& loaded,
                                                  const KvPlan& plan) {
  SimulatedSide simulated;
  std::vector<std::unique_ptr<events::EventRecorder>> recorders;
  ReplayCliOptions run = options.replay;
  if (!options.events_path.empty()) {
    run.kv_event_sink = [&](int replica) -> KvEventSink* {
      recorders.push_back(std::make_unique<events::EventRecorder>(
          plan, replica,
          [&simulated](events::EventBatch&& b) { simulated.events.push_back(std::move(b)); },
          /*hold_until_delivered=*/true));
      return recorders.back().get();
    };
  }
  WarnAboutSettingsWithoutEffect(run, loaded.engine, plan);
  PREFIXSIM_ASSIGN_OR_RETURN(simulated.result,
                             RunReplay(run, loaded.model, loaded.engine, plan, "parity",
                                       /*keep_records=*/!options.html.html_path.empty()));
  // What changed after a replica's last scheduled step (nothing, as the engine is built) would
  // still be a batch of the stream.
  for (auto& r : recorders) {
    r->Flush(simulated.events.empty()
                 ? 0
                 : static_cast<int64_t>(simulated.events.back().ts * 1e9 + 0.5));
  }
  return simulated;
}

absl::StatusOr<std::optional<EventComparison>> CompareEvents(const ParityCommandOptions& options,
                                                             const SimulatedSide& simulated,
                                                             const MeasuredSide& measured,
                                                             const KvPlan& plan) {
  if (options.events_path.empty()) return std::nullopt;
  EventComparison comparison;
  PREFIXSIM_ASSIGN_OR_RETURN(comparison.divergence,
                             events::CompareEventHistories(simulated.events, measured.events));
  std::vector<int64_t> block_sizes;
  for (const KvGroup& g : plan.groups) block_sizes.push_back(g.block_size);
  comparison.cannot_compare =
      events::ComparabilityWarnings(simulated.events, measured.events, block_sizes);
  return comparison;
}

nlohmann::ordered_json OptionalJson(const std::optional<int64_t>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json EventComparisonJson(const EventComparison& comparison) {
  const events::EventDivergence& d = comparison.divergence;
  nlohmann::ordered_json e;
  e["steps"] = d.steps;
  e["steps_agreeing"] = d.steps_agreeing;
  e["agreement"] = d.agreement();
  e["first_divergent_step"] = OptionalJson(d.first_divergent_step);
  e["first_divergent_replica"] = OptionalJson(d.first_divergent_rank);
  e["first_divergent_group"] = OptionalJson(d.first_divergent_group);
  e["warnings"] = comparison.cannot_compare;
  e["groups"] = nlohmann::ordered_json::array();
  for (const events::GroupDivergence& g : d.groups) {
    e["groups"].push_back({{"replica", g.rank},
                           {"group", g.group},
                           {"stored_simulated", g.stored_sim},
                           {"stored_measured", g.stored_measured},
                           {"removed_simulated", g.removed_sim},
                           {"removed_measured", g.removed_measured},
                           {"stored_simulated_only", g.stored_sim_only},
                           {"stored_measured_only", g.stored_measured_only},
                           {"steps_agreeing", g.steps_agreeing}});
  }
  return e;
}

nlohmann::ordered_json ParityJson(const SimulatedSide& simulated, const MeasuredSide& measured,
                                  const std::optional<EventComparison>& events) {
  const PrefixCacheStats& sim = simulated.result.prefix_cache;
  nlohmann::ordered_json j;
  j["simulated"] = {{"prefix_cache_queries", sim.queries},
                    {"prefix_cache_hits", sim.hits},
                    {"hit_rate", simulated.hit_rate()}};
  if (const auto& m = measured.hit_rate) {
    j["measured"] = {{"prefix_cache_queries", m->queries},
                     {"prefix_cache_hits", m->hits},
                     {"hit_rate", m->rate()}};
    j["hit_rate_difference"] = simulated.hit_rate() - m->rate();
  }
  if (events) j["kv_events"] = EventComparisonJson(*events);
  return j;
}

void PrintEventComparison(const EventComparison& comparison, std::ostream& out) {
  const events::EventDivergence& d = comparison.divergence;
  out << "KV events: cached sets agree after " << d.steps_agreeing << " of " << d.steps
      << " steps (" << Percent(d.agreement()) << ")\n";
  for (const std::string& w : comparison.cannot_compare)
    out << "  CANNOT COMPARE: " << run::SpellAsFlags(w) << "\n";
  if (d.first_divergent_step) {
    out << "  first divergence: step " << *d.first_divergent_step << ", replica "
        << *d.first_divergent_rank << ", group " << *d.first_divergent_group << "\n";
  }
  out << "  replica group  stored sim/measured  removed sim/measured  "
         "stored only by sim/measured  steps agreeing\n";
  for (const events::GroupDivergence& g : d.groups) {
    out << absl::StrFormat("  %7d %5d  %10d/%-8d  %11d/%-8d  %15d/%-11d  %d\n", g.rank, g.group,
                           g.stored_sim, g.stored_measured, g.removed_sim, g.removed_measured,
                           g.stored_sim_only, g.stored_measured_only, g.steps_agreeing);
  }
}

void PrintParityText(const SimulatedSide& simulated, const MeasuredSide& measured,
                     const std::optional<EventComparison>& events, std::ostream& out) {
  const PrefixCacheStats& sim = simulated.result.prefix_cache;
  const double sim_rate = simulated.hit_rate();
  out << "prefix-cache hit rate (vLLM's counters, tokens)\n"
      << "  simulated  " << Percent(sim_rate) << "  (" << sim.hits << " of " << sim.queries
      << ")\n";
  if (const auto& m = measured.hit_rate) {
    out << "  measured   " << Percent(m->rate()) << "  (" << m->hits << " of " << m->queries
        << ")\n"
        << "  difference " << absl::StrFormat("%+.2f", 100 * (sim_rate - m->rate())) << " points\n";
  }
  if (events) PrintEventComparison(*events, out);
}

// The HTML page's parity section.
ParityFigures ToParityFigures(const SimulatedSide& simulated, const MeasuredSide& measured,
                              const std::optional<EventComparison>& events) {
  ParityFigures figures;
  figures.simulated_queries = simulated.result.prefix_cache.queries;
  figures.simulated_hits = simulated.result.prefix_cache.hits;
  if (const auto& m = measured.hit_rate) {
    figures.has_measured = true;
    figures.measured_queries = m->queries;
    figures.measured_hits = m->hits;
  }
  if (events) {
    const events::EventDivergence& d = events->divergence;
    figures.has_events = true;
    figures.steps = d.steps;
    figures.steps_agreeing = d.steps_agreeing;
    figures.first_divergent_step = d.first_divergent_step.value_or(-1);
    figures.cannot_compare = events->cannot_compare;
    figures.first_divergent_replica = d.first_divergent_rank.value_or(-1);
    figures.first_divergent_group = d.first_divergent_group.value_or(-1);
    for (const events::GroupDivergence& g : d.groups) {
      figures.groups.push_back({g.rank, g.group, g.stored_sim, g.stored_measured, g.removed_sim,
                                g.removed_measured, g.stored_sim_only, g.stored_measured_only,
                                g.steps_agreeing});
    }
    figures.replicas_at_step = d.replicas_at_step;
    figures.agreeing_at_step = d.agreeing_at_step;
  }
  return figures;
}

absl::Status RunParityCommand(const ParityCommandOptions& options, CommandOutput& out) {
  if (options.metrics.empty() && options.events_path.empty()) {
    return absl::InvalidArgumentError(
        "parity compares the simulation with a vLLM run: give --vllm-metrics BEFORE.prom "
        "AFTER.prom, --vllm-kv-events FILE or both (replay gives the simulated side alone)");
  }
  InstallInterruptHandlers();
  PREFIXSIM_ASSIGN_OR_RETURN(const MeasuredSide measured, ReadMeasuredSide(options));
  PREFIXSIM_ASSIGN_OR_RETURN(const ModelAndEngine loaded,
                             LoadModelAndEngine(options.replay.model_engine));
  PREFIXSIM_ASSIGN_OR_RETURN(const KvPlan plan, ResolvePlanWarningOfSmallPools(
                                                    loaded.model, loaded.engine, options.policy));
  PREFIXSIM_RETURN_IF_ERROR(CheckHtmlOptions(options.html, loaded, {options.policy}));
  PREFIXSIM_ASSIGN_OR_RETURN(const SimulatedSide simulated,
                             ReplaySimulatedSide(options, loaded, plan));
  PREFIXSIM_ASSIGN_OR_RETURN(const std::optional<EventComparison> events,
                             CompareEvents(options, simulated, measured, plan));
  if (options.json) {
    out.out << ParityJson(simulated, measured, events).dump(2) << "\n";
  } else {
    PrintParityText(simulated, measured, events, out.out);
  }
  if (!options.html.html_path.empty()) {
    const ParityFigures figures = ToParityFigures(simulated, measured, events);
    const std::vector<ReplayResult> one = {simulated.result};
    PREFIXSIM_RETURN_IF_ERROR(WriteHtmlPage(options.html, options.replay, loaded, one,
                                            /*deltas=*/false, "parity", &figures));
  }
  out.exit_code = InterruptSignal() != 0 ? kExitInterrupted : kExitOk;
  return absl::OkStatus();
}

}  // namespace

void AddParityCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<ParityCommandOptions>();
  auto* cmd = app.add_subcommand(
      "parity",
      "the simulated engine against a measured vLLM run: hit rate against vLLM's counters, the KV "
      "event stream against a recorded one");
  AddReplayCliOptions(cmd, &options->replay);
  cmd->add_option("--policy,-p", options->policy,
                  "block-size policy: " + absl::StrJoin(RegisteredPolicyNames(), ", "))
      ->capture_default_str();
  cmd->add_option("--vllm-metrics", options->metrics,
                  "BEFORE.prom AFTER.prom: vLLM's /metrics scraped before and after the run")
      ->expected(2);
  cmd->add_option("--vllm-kv-events", options->events_path,
                  "vLLM's KV event log of the run (length-prefixed msgpack or JSON lines, "
                  "docs/kv-events.md)");
  cmd->add_flag("--json", options->json, "print JSON instead of text");
  AddHtmlCliOptions(cmd, &options->html);
  SetCommandRun(cmd, "parity", ctx,
                [options](CommandOutput& out) { return RunParityCommand(*options, out); });
}

}  // namespace prefixsim::cli
