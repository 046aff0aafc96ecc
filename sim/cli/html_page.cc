#include "sim/cli/html_page.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "prefixsim/analyze.h"
#include "prefixsim/kv_plan.h"
#include "sim/cli/input_checks.h"
#include "sim/cli/replay_common.h"
#include "sim/report/report.h"
#include "sim/run/option_flags.h"
#include "sim/util/byte_size.h"
#include "sim/util/parallel_for.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {

void AddHtmlCliOptions(CLI::App* cmd, HtmlCliOptions* o) {
  CLI::Option* html =
      cmd->add_option("--html", o->html_path,
                      "write a self-contained HTML report here (plan, hit rate over time, CDFs, "
                      "capacity sweep, alignment curve)");
  cmd->add_option("--capacities", o->capacities,
                  "with --html: also replay at these KV cache sizes, comma-separated bytes or "
                  "sizes with a unit (e.g. 16GiB,64GiB,256GiB,1TiB; KiB..TiB are powers of 1024, "
                  "KB..TB powers of 1000)")
      ->needs(html)
      ->check([](const std::string& list) {
        auto parsed = ParseCapacities(list);
        return parsed.ok() ? std::string() : std::string(parsed.status().message());
      });
}

absl::StatusOr<std::vector<int64_t>> ParseCapacities(const std::string& list) {
  if (absl::StripAsciiWhitespace(list).empty()) return std::vector<int64_t>();
  return ParseByteSizeList(list, "");
}

absl::Status CheckHtmlOptions(const HtmlCliOptions& options, const ModelAndEngine& loaded,
                              const std::vector<std::string>& policies) {
  if (options.html_path.empty()) {
    if (!options.capacities.empty()) {
      return absl::InvalidArgumentError("--capacities needs --html (it feeds the report page)");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<int64_t>> parsed = ParseCapacities(options.capacities);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--capacities: ", parsed.status().message()));
  }
  for (const int64_t bytes : *parsed) {
    EngineConfig engine = loaded.engine;
    engine.kv_cache_bytes = bytes;
    engine.num_gpu_blocks.reset();
    for (const std::string& policy : policies) {
      absl::StatusOr<KvPlan> plan = ResolvePlanWarningOfSmallPools(loaded.model, engine, policy);
      if (!plan.ok()) {
        return absl::Status(plan.status().code(),
                            absl::StrCat("--capacities ", bytes, " bytes, policy ", policy, ": ",
                                         plan.status().message()));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status WriteHtmlPage(const HtmlCliOptions& options, const ReplayCliOptions& replay,
                           const ModelAndEngine& loaded, const std::vector<ReplayResult>& results,
                           bool deltas, const std::string& command, const ParityFigures* parity,
                           const TuneFigures* tune) {
  if (options.html_path.empty()) return absl::OkStatus();
  // CheckHtmlOptions has accepted the list.
  PREFIXSIM_ASSIGN_OR_RETURN(const std::vector<int64_t> capacities,
                             ParseCapacities(options.capacities));
  HtmlReportOptions page;
  page.title = absl::StrCat("prefixsim ", command, ": ", loaded.model.name);
  page.subtitle =
      absl::StrCat("model ", loaded.model.name, " · engine ",
                   std::filesystem::path(loaded.engine.source).filename().string(), " · trace ",
                   std::filesystem::path(replay.trace).filename().string());
  page.deltas = deltas;
  page.parity = parity;
  page.tune = tune;
  page.configured_kv_cache_bytes = loaded.engine.kv_cache_bytes.value_or(0);

  // The sweep: every policy at every capacity; the configured capacity reuses the main result.
  const std::vector<CapacitySweepJob> jobs =
      PlanCapacitySweep(results, capacities, !loaded.engine.num_gpu_blocks, &page);
  std::vector<std::optional<absl::StatusOr<CapacitySweepPoint>>> done(jobs.size());
  // The alignment curve, with every policy's A on it, is item 0, so it starts first and runs
  // while the other threads replay the capacities.
  AnalyzeOptions analyze_options;
  for (const ReplayResult& r : results) analyze_options.alignments.push_back(r.plan.hit_alignment);
  analyze_options.capacity_curve = false;
  TraceOptions trace_options = replay.trace_options;
  trace_options.seed = replay.seed;
  absl::StatusOr<AnalyzeResult> analyzed = absl::UnknownError("not analyzed");
  ParallelFor(jobs.size() + 1, /*jobs=*/0, [&](size_t k) {
    if (k == 0) {
      analyzed = AnalyzeTraceFile(replay.trace, trace_options, analyze_options);
      return;
    }
    const size_t j = k - 1;
    EngineConfig engine = loaded.engine;
    engine.kv_cache_bytes = jobs[j].bytes;
    engine.num_gpu_blocks.reset();
    const std::string& policy = results[jobs[j].result].policy;
    absl::StatusOr<KvPlan> plan = ResolvePlanWarningOfSmallPools(loaded.model, engine, policy);
    absl::StatusOr<ReplayResult> r =
        plan.ok() ? RunReplay(replay, loaded.model, engine, *plan, "") : plan.status();
    if (!r.ok()) {
      done[j] = absl::Status(r.status().code(),
                             absl::StrCat("--capacities ", jobs[j].bytes, " bytes, policy ", policy,
                                          ": ", r.status().message()));
      return;
    }
    done[j] = SweepPointOf(*r, jobs[j].bytes);
  });
  for (auto& d : done) {
    if (!d->ok()) return d->status();
    page.capacity_sweep.push_back(**d);
  }
  if (analyzed.ok()) {
    page.analyze = &*analyzed;
  } else {
    page.analyze_error = std::string(analyzed.status().message());
  }
  return WriteOutput(options.html_path, run::SpellAsFlags(HtmlReport(results, page)), std::cout);
}

}  // namespace prefixsim::cli
