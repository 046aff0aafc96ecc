// Scenario grids (docs/design.md §2 "Grid"): a scenario file names a base point and axes; the grid
// is the product of the axes. Each point runs like `prefixsim replay`; `sweep` writes one JSON file
// per point and merged results, `regress` compares the points with a stored baseline.
// Format: docs/scenarios.md.
#ifndef PREFIXSIM_SIM_GRID_GRID_H_
#define PREFIXSIM_SIM_GRID_GRID_H_

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

// Runs one point like `prefixsim replay` and returns its JSON summary.
absl::StatusOr<nlohmann::ordered_json> RunPoint(const Scenario& scenario, const Point& point,
                                                bool include_wall_time);

// Headline metrics of a summary (hit_rate, ttft_p99_ms, ...), in a fixed order.
nlohmann::ordered_json HeadlineMetrics(const nlohmann::ordered_json& summary);
// The headline names and the JSON pointers into the summary they read, in that order
// (regress takes the names as aliases of the pointers' dotted paths).
const std::vector<std::pair<std::string, std::string>>& HeadlineMetricPointers();

// The columns results.csv adds after the headline metrics: fleet_replicas (the fleet size run,
// the one --replicas auto chose), fleet_router, fleet_imbalance (1, "" and 1 for one engine),
// lost_to_alignment_tokens and overloaded. Not regress aliases: regress names them by their
// summary paths (fleet.imbalance, ...).
nlohmann::ordered_json FleetColumns(const nlohmann::ordered_json& summary);

struct SweepOptions {
  std::string out_dir;
  int jobs = 0;  // 0: hardware concurrency
  int shard = 0;
  int num_shards = 1;
  bool resume = false;
  bool include_wall_time = true;
  bool quiet = false;
};

struct SweepStats {
  int64_t run = 0;
  int64_t skipped = 0;  // already done (--resume)
  // Interrupted (SIGINT/SIGTERM, see sim/cli/interrupt.h): the signal, and the points of the
  // shard that were stopped or never started; none of them has a point file.
  int interrupt_signal = 0;
  int64_t not_run = 0;
};

// Runs the points of the shard on a thread pool, writes DIR/points/<index>-<id>.json (atomic)
// and then DIR/results.{csv,json} from every point file in DIR. Interrupted, it starts no new
// point, writes no file for a point that was stopped, and merges the finished ones.
absl::StatusOr<SweepStats> RunSweep(const Scenario& scenario, const SweepOptions& options);

// Merges the point files of `dirs` into `out_dir` (points/ and results.{csv,json}).
// `require_complete`: every index of the grid must be present.
absl::Status MergeSweepDirs(const std::vector<std::string>& dirs, const std::string& out_dir,
                            bool require_complete);

// Writes `text` to `path` through a temp file in the same directory and a rename.
absl::Status WriteFileAtomic(const std::string& path, const std::string& text);

// Runs `points` on `jobs` threads; results[i] belongs to points[i] (order independent of jobs).
std::vector<absl::StatusOr<nlohmann::ordered_json>> RunPoints(const Scenario& scenario,
                                                              const std::vector<Point>& points,
                                                              int jobs, bool include_wall_time);

}  // namespace prefixsim::grid

#endif  // PREFIXSIM_SIM_GRID_GRID_H_
