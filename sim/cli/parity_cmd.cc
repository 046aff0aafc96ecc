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
#include "sim/cli/option_flags.h"
#include "sim/cli/replay_common.h"
#include "sim/events/event_log.h"
#include "sim/events/event_recorder.h"
#include "sim/events/parity.h"
#include "sim/report/report.h"

namespace prefixsim::cli {
namespace {

absl::StatusOr<events::PromScrape> ReadProm(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(path + ": cannot open the metrics file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return events::ParsePromText(buffer.str(), path);
}

std::string Percent(double x) { return absl::StrFormat("%.2f%%", 100 * x); }

}  // namespace

void AddParityCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    ReplayCliOptions replay;
    std::string policy = "new";
    std::vector<std::string> metrics;
    std::string events_path;
    bool json = false;
    HtmlCliOptions html;
  };
  auto options = std::make_shared<Options>();
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
  cmd->callback([options, &ctx] {
    if (options->metrics.empty() && options->events_path.empty()) {
      ctx.exit_code = ReportError(
          "parity", absl::InvalidArgumentError(
                        "parity compares the simulation with a vLLM run: give --vllm-metrics "
                        "BEFORE.prom AFTER.prom, --vllm-kv-events FILE or both (replay gives the "
                        "simulated side alone)"));
      return;
    }
    InstallInterruptHandlers();
    // The measured side first: a malformed file fails before the replay.
    std::optional<events::MeasuredHitRate> measured;
    if (!options->metrics.empty()) {
      auto before = ReadProm(options->metrics[0]);
      auto after = before.ok() ? ReadProm(options->metrics[1]) : before;
      if (!before.ok() || !after.ok()) {
        ctx.exit_code = ReportError("parity", before.ok() ? after.status() : before.status());
        return;
      }
      auto m =
          events::MeasuredFromScrapes(*before, options->metrics[0], *after, options->metrics[1]);
      if (!m.ok()) {
        ctx.exit_code = ReportError("parity", m.status());
        return;
      }
      measured = *m;
    }
    std::vector<events::EventBatch> recorded;
    if (!options->events_path.empty()) {
      auto log = events::ReadEventLog(options->events_path);
      if (!log.ok()) {
        ctx.exit_code = ReportError("parity", log.status());
        return;
      }
      recorded = *std::move(log);
    }
    auto loaded = LoadModelAndEngine(options->replay.model_engine);
    if (!loaded.ok()) {
      ctx.exit_code = ReportError("parity", loaded.status());
      return;
    }
    auto plan = ResolvePlanWarningOfSmallPools(loaded->model, loaded->engine, options->policy);
    if (!plan.ok()) {
      ctx.exit_code = ReportError("parity", plan.status());
      return;
    }
    if (absl::Status s = CheckHtmlOptions(options->html, *loaded, {options->policy}); !s.ok()) {
      ctx.exit_code = ReportError("parity", s);
      return;
    }
    std::vector<events::EventBatch> simulated;
    std::vector<std::unique_ptr<events::EventRecorder>> recorders;
    ReplayCliOptions run = options->replay;
    if (!options->events_path.empty()) {
      run.kv_event_sink = [&](int replica) -> KvEventSink* {
        recorders.push_back(std::make_unique<events::EventRecorder>(
            *plan, replica,
            [&simulated](events::EventBatch&& b) { simulated.push_back(std::move(b)); },
            /*hold_until_delivered=*/true));
        return recorders.back().get();
      };
    }
    WarnAboutSettingsWithoutEffect(run, loaded->engine, *plan);
    auto result = RunReplay(run, loaded->model, loaded->engine, *plan, "parity",
                            /*keep_records=*/!options->html.html_path.empty());
    if (!result.ok()) {
      ctx.exit_code = ReportError("parity", result.status());
      return;
    }
    // What changed after a replica's last scheduled step (nothing, as the engine is built) would
    // still be a batch of the stream.
    for (auto& r : recorders) {
      r->Flush(simulated.empty() ? 0 : static_cast<int64_t>(simulated.back().ts * 1e9 + 0.5));
    }
    const PrefixCacheStats& sim = result->prefix_cache;
    const double sim_rate =
        sim.queries > 0 ? static_cast<double>(sim.hits) / static_cast<double>(sim.queries) : 0;
    std::optional<events::EventDivergence> divergence;
    std::vector<std::string> comparability;  // what the event comparison cannot say
    if (!options->events_path.empty()) {
      auto d = events::CompareEventHistories(simulated, recorded);
      if (!d.ok()) {
        ctx.exit_code = ReportError("parity", d.status());
        return;
      }
      divergence = *std::move(d);
      std::vector<int64_t> block_sizes;
      for (const KvGroup& g : plan->groups) block_sizes.push_back(g.block_size);
      comparability = events::ComparabilityWarnings(simulated, recorded, block_sizes);
    }
    if (options->json) {
      nlohmann::ordered_json j;
      j["simulated"] = {{"prefix_cache_queries", sim.queries},
                        {"prefix_cache_hits", sim.hits},
                        {"hit_rate", sim_rate}};
      if (measured) {
        j["measured"] = {{"prefix_cache_queries", measured->queries},
                         {"prefix_cache_hits", measured->hits},
                         {"hit_rate", measured->rate()}};
        j["hit_rate_difference"] = sim_rate - measured->rate();
      }
      if (divergence) {
        nlohmann::ordered_json e;
        e["steps"] = divergence->steps;
        e["steps_agreeing"] = divergence->steps_agreeing;
        e["agreement"] = divergence->agreement();
        e["first_divergent_step"] = divergence->first_divergent_step
                                        ? nlohmann::ordered_json(*divergence->first_divergent_step)
                                        : nlohmann::ordered_json(nullptr);
        e["first_divergent_replica"] =
            divergence->first_divergent_rank
                ? nlohmann::ordered_json(*divergence->first_divergent_rank)
                : nlohmann::ordered_json(nullptr);
        e["first_divergent_group"] =
            divergence->first_divergent_group
                ? nlohmann::ordered_json(*divergence->first_divergent_group)
                : nlohmann::ordered_json(nullptr);
        e["warnings"] = comparability;
        e["groups"] = nlohmann::ordered_json::array();
        for (const events::GroupDivergence& g : divergence->groups) {
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
        j["kv_events"] = std::move(e);
      }
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << "prefix-cache hit rate (vLLM's counters, tokens)\n"
                << "  simulated  " << Percent(sim_rate) << "  (" << sim.hits << " of "
                << sim.queries << ")\n";
      if (measured) {
        std::cout << "  measured   " << Percent(measured->rate()) << "  (" << measured->hits
                  << " of " << measured->queries << ")\n"
                  << "  difference "
                  << absl::StrFormat("%+.2f", 100 * (sim_rate - measured->rate())) << " points\n";
      }
      if (divergence) {
        const events::EventDivergence& d = *divergence;
        std::cout << "KV events: cached sets agree after " << d.steps_agreeing << " of " << d.steps
                  << " steps (" << Percent(d.agreement()) << ")\n";
        for (const std::string& w : comparability)
          std::cout << "  CANNOT COMPARE: " << SpellForCli(w) << "\n";
        if (d.first_divergent_step) {
          std::cout << "  first divergence: step " << *d.first_divergent_step << ", replica "
                    << *d.first_divergent_rank << ", group " << *d.first_divergent_group << "\n";
        }
        std::cout << "  replica group  stored sim/measured  removed sim/measured  "
                     "stored only by sim/measured  steps agreeing\n";
        for (const events::GroupDivergence& g : d.groups) {
          std::cout << absl::StrFormat("  %7d %5d  %10d/%-8d  %11d/%-8d  %15d/%-11d  %d\n", g.rank,
                                       g.group, g.stored_sim, g.stored_measured, g.removed_sim,
                                       g.removed_measured, g.stored_sim_only,
                                       g.stored_measured_only, g.steps_agreeing);
        }
      }
    }
    if (!options->html.html_path.empty()) {
      ParityFigures figures;
      figures.simulated_queries = sim.queries;
      figures.simulated_hits = sim.hits;
      if (measured) {
        figures.has_measured = true;
        figures.measured_queries = measured->queries;
        figures.measured_hits = measured->hits;
      }
      if (divergence) {
        const events::EventDivergence& d = *divergence;
        figures.has_events = true;
        figures.steps = d.steps;
        figures.steps_agreeing = d.steps_agreeing;
        figures.first_divergent_step = d.first_divergent_step.value_or(-1);
        figures.cannot_compare = comparability;
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
      const std::vector<ReplayResult> one = {*result};
      if (absl::Status s = WriteHtmlPage(options->html, options->replay, *loaded, one,
                                         /*deltas=*/false, "parity", &figures);
          !s.ok()) {
        ctx.exit_code = ReportError("parity", s);
        return;
      }
    }
    ctx.exit_code = InterruptSignal() != 0 ? kExitInterrupted : kExitOk;
  });
}

}  // namespace prefixsim::cli
