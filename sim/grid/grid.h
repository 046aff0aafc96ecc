// Scenario grids (docs/design.md §2 "Grid"): a scenario file names a base point and axes; the grid
// is the product of the axes. Each point runs like `prefixsim replay`; `sweep` writes one JSON file
// per point and merged results, `regress` compares the points with a stored baseline.
// Format: docs/scenarios.md.
#ifndef PREFIXSIM_SIM_GRID_GRID_H_
#define PREFIXSIM_SIM_GRID_GRID_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace prefixsim::grid {

// One point: the raw values of every key (model, engine, trace, policy, seed and the engine
// overrides), as written in the scenario file. `axes` holds the keys the point's grid varies.
struct Point {
  int64_t index = 0;
  std::string id;                 // 12 hex chars of a hash of `values` (canonical JSON)
  nlohmann::ordered_json values;  // key -> value, every key of the point
  std::vector<std::string> axes;  // keys varied by the point's grid, in file order
};

// One side of a tolerance: a change that way holds while it is at most max(abs, rel x
// |baseline|). A side with neither set is unbounded: a change that way is an improvement.
struct ToleranceBound {
  double abs = -1;  // < 0: not set
  double rel = -1;
  bool bounded() const { return abs >= 0 || rel >= 0; }
};

// A metric's tolerance in a regress suite (docs/scenarios.md "Tolerances"): `{"abs", "rel"}`
// bound both sides; `direction` or `max_increase`/`max_decrease` leave one side unbounded.
struct Tolerance {
  ToleranceBound increase;
  ToleranceBound decrease;
};

struct Scenario {
  std::string path;  // the scenario file
  std::string dir;   // its directory: relative trace/model/engine paths resolve against it
  std::string name;
  std::vector<std::string> axis_keys;  // union over the grids, first-seen order
  std::vector<Point> points;
  // regress only, file order; the metric name as written (checked by CheckTolerances,
  // sim/grid/regress.h).
  std::vector<std::pair<std::string, Tolerance>> tolerances;
};

// Keys an axis (or the base) may set.
std::vector<std::string> KnownKeys();

// 64-bit FNV-1a of `text`, as 16 hex chars; point ids are its first 12.
std::string HashHex(const std::string& text);

// Reads and expands a scenario file. Bad input: InvalidArgument naming the file and field.
absl::StatusOr<Scenario> LoadScenario(const std::string& path);

// Points of shard `shard` of `num_shards` (index ≡ shard mod num_shards).
std::vector<Point> ShardPoints(const std::vector<Point>& points, int shard, int num_shards);

// Parses "I/N" (0 <= I < N). `field` names the flag in the error.
absl::Status ParseShard(const std::string& text, int* shard, int* num_shards);

// Loads every point's model, engine and KV plan and checks its trace exists, before anything
// runs. Errors name the scenario file and the point.
absl::Status ValidatePoints(const Scenario& scenario);

// Runs one point like `prefixsim replay` and returns its JSON summary. `interrupt` (may be null):
// as run::RunReplay's (the summary is then marked partial).
absl::StatusOr<nlohmann::ordered_json> RunPoint(const Scenario& scenario, const Point& point,
                                                bool include_wall_time,
                                                const std::atomic<int>* interrupt = nullptr);

}  // namespace prefixsim::grid

#endif  // PREFIXSIM_SIM_GRID_GRID_H_
