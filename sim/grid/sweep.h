// Running a grid (docs/design.md §2 "Grid"): the points of a shard on a thread pool, one point
// file each, then the merged results (sim/grid/merge.h).
#ifndef PREFIXSIM_SIM_GRID_SWEEP_H_
#define PREFIXSIM_SIM_GRID_SWEEP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/grid/grid.h"

namespace prefixsim::grid {

struct SweepOptions {
  std::string out_dir;
  int jobs = 0;  // 0: hardware concurrency
  int shard = 0;
  int num_shards = 1;
  bool resume = false;
  bool include_wall_time = true;
};

struct SweepStats {
  int64_t run = 0;
  int64_t overloaded = 0;  // of `run`: their replay fell behind (summary "overloaded": true)
  int64_t skipped = 0;     // already done (resumed)
  // Interrupted (RunSweep's `interrupt`; the CLI sets it on SIGINT/SIGTERM): the signal, and the
  // points of the shard that were stopped or never started; none of them has a point file.
  int interrupt_signal = 0;
  int64_t not_run = 0;
};

// Runs the points of the shard on a thread pool, writes DIR/points/<index>-<id>.json (atomic)
// and then DIR/results.{csv,json} from every point file in DIR. `interrupt` (may be null) reads
// non-zero: it starts no new point, writes no file for a point that was stopped, and merges the
// finished ones. `on_point_done` (may be empty) is called, under a lock, as each point's file is
// written, with whether that point's replay was overloaded.
absl::StatusOr<SweepStats> RunSweep(
    const Scenario& scenario, const SweepOptions& options, const std::atomic<int>* interrupt,
    const std::function<void(const Point&, bool overloaded)>& on_point_done = {});

// Runs `points` on `jobs` threads; results[i] belongs to points[i] (order independent of jobs).
std::vector<absl::StatusOr<nlohmann::ordered_json>> RunPoints(
    const Scenario& scenario, const std::vector<Point>& points, int jobs, bool include_wall_time,
    const std::atomic<int>* interrupt = nullptr);

}  // namespace prefixsim::grid

#endif  // PREFIXSIM_SIM_GRID_SWEEP_H_
