// `--html` and `--capacities` for `prefixsim replay` and `prefixsim compare`: the report page
// (sim/report/html_report.cc), with the capacity sweep and the trace's alignment curve that it
// needs, computed here.
#ifndef PREFIXSIM_SIM_CLI_HTML_PAGE_H_
#define PREFIXSIM_SIM_CLI_HTML_PAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prefixsim/engine.h"
#include "sim/cli/common.h"
#include "sim/cli/replay_common.h"
#include "sim/report/report.h"

namespace prefixsim::cli {

struct HtmlCliOptions {
  std::string html_path;
  std::string capacities;  // "a,b,c": sizes as sim/util/byte_size.h reads them
};

// Adds --html and --capacities to `cmd`.
void AddHtmlCliOptions(CLI::App* cmd, HtmlCliOptions* options);

// "16GiB,64GiB,1TiB" or "17179869184,..." -> bytes (ParseByteSizeList; "" -> none).
// InvalidArgument names the bad entry.
absl::StatusOr<std::vector<int64_t>> ParseCapacities(const std::string& list);

// Checks --html/--capacities before any replay runs: --capacities needs --html, every entry
// parses, and every policy's plan at every capacity passes vLLM's startup memory check
// (docs/semantics.md §1, §6.4); the error names the capacity and the policy.
absl::Status CheckHtmlOptions(const HtmlCliOptions& options, const ModelAndEngine& loaded,
                              const std::vector<std::string>& policies);

// REQUIRES: CheckHtmlOptions(options, ...) returned OK.
// Runs the capacity sweep (every result's policy at every capacity, on a few threads) and the
// trace's alignment curve, then writes the page to options.html_path. Does nothing without
// --html. `deltas`: compare's delta column. `parity`: `prefixsim parity`'s section, or null;
// `tune`: `prefixsim tune`'s, or null.
absl::Status WriteHtmlPage(const HtmlCliOptions& options, const ReplayCliOptions& replay,
                           const ModelAndEngine& loaded, const std::vector<ReplayResult>& results,
                           bool deltas, const std::string& command,
                           const ParityFigures* parity = nullptr,
                           const TuneFigures* tune = nullptr);

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_HTML_PAGE_H_
