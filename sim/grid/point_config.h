// What the points of a scenario run with, and the helpers the scenario reader (scenario.cc) shares
// with the runners (point.cc, sweep.cc, merge.cc). Private to sim/grid.
#ifndef PREFIXSIM_SIM_GRID_POINT_CONFIG_H_
#define PREFIXSIM_SIM_GRID_POINT_CONFIG_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/grid/grid.h"
#include "sim/run/replay.h"

namespace prefixsim::grid {

// Everything one point runs with.
struct PointConfig {
  run::ReplayConfig replay;
  std::string policy = "new";
};

// The point's values applied to a fresh config (relative paths against the scenario's folder).
absl::StatusOr<PointConfig> ConfigFor(const Scenario& scenario, const Point& point);

// "FILE: field FIELD: MESSAGE" as InvalidArgument.
absl::Status FieldError(const std::string& file, const std::string& field,
                        std::string_view message);

// Canonical JSON of a point's values: keys sorted, compact (what point ids hash).
std::string Canonical(const nlohmann::ordered_json& values);

// The file parsed as JSON; NotFound or InvalidArgument naming it.
absl::StatusOr<nlohmann::ordered_json> ReadJsonFile(const std::string& path);

}  // namespace prefixsim::grid

#endif  // PREFIXSIM_SIM_GRID_POINT_CONFIG_H_
