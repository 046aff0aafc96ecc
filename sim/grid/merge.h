// Merging sweep outputs: point files into results.{csv,json}, with the headline metrics and fleet
// columns of each point's summary (docs/scenarios.md).
#ifndef PREFIXSIM_SIM_GRID_MERGE_H_
#define PREFIXSIM_SIM_GRID_MERGE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "sim/grid/grid.h"

namespace prefixsim::grid {

// Headline metrics of a summary (hit_rate, ttft_p99_ms, ...), in a fixed order.
nlohmann::ordered_json HeadlineMetrics(const nlohmann::ordered_json& summary);
// The headline names and the JSON pointers into the summary they read, in that order
// (regress takes the names as aliases of the pointers' dotted paths).
const std::vector<std::pair<std::string, std::string>>& HeadlineMetricPointers();

// The columns results.csv adds after the headline metrics: fleet_replicas (the fleet size run,
// the one auto-sizing chose), fleet_router, fleet_imbalance (1, "" and 1 for one engine),
// lost_to_alignment_tokens and overloaded. Not regress aliases: regress names them by their
// summary paths (fleet.imbalance, ...).
nlohmann::ordered_json FleetColumns(const nlohmann::ordered_json& summary);

// Merges the point files of `dirs` into `out_dir` (points/ and results.{csv,json}).
// `require_complete`: every index of the grid must be present.
absl::Status MergeSweepDirs(const std::vector<std::string>& dirs, const std::string& out_dir,
                            bool require_complete);

}  // namespace prefixsim::grid

#endif  // PREFIXSIM_SIM_GRID_MERGE_H_
