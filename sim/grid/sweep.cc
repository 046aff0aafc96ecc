#include "sim/grid/sweep.h"

#include <atomic>
#include <filesystem>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/grid/merge.h"
#include "sim/util/atomic_file.h"
#include "sim/util/parallel_for.h"
#include "sim/util/status_macros.h"

namespace prefixsim::grid {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string PointFileName(const Point& p) { return absl::StrFormat("%05d-%s.json", p.index, p.id); }

}  // namespace

std::vector<absl::StatusOr<Json>> RunPoints(const Scenario& scenario,
                                            const std::vector<Point>& points, int jobs,
                                            bool include_wall_time,
                                            const std::atomic<int>* interrupt) {
  std::vector<absl::StatusOr<Json>> results(points.size(), absl::UnknownError("not run"));
  ParallelFor(points.size(), jobs, [&](size_t i) {
    results[i] = RunPoint(scenario, points[i], include_wall_time, interrupt);
  });
  return results;
}

absl::StatusOr<SweepStats> RunSweep(
    const Scenario& scenario, const SweepOptions& o, const std::atomic<int>* interrupt,
    const std::function<void(const Point&, bool overloaded)>& on_point_done) {
  const fs::path points_dir = fs::path(o.out_dir) / "points";
  std::error_code ec;
  fs::create_directories(points_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(points_dir.string(), ": ", ec.message()));
  SweepStats stats;
  std::vector<Point> todo;
  for (const Point& p : ShardPoints(scenario.points, o.shard, o.num_shards)) {
    const fs::path file = points_dir / PointFileName(p);
    if (fs::exists(file)) {
      if (!o.resume) {
        return absl::FailedPreconditionError(
            absl::StrCat(file.string(), ": already exists (set `resume` to keep finished points)"));
      }
      ++stats.skipped;
      continue;
    }
    todo.push_back(p);
  }
  auto interrupted = [interrupt] {
    return interrupt != nullptr && interrupt->load(std::memory_order_relaxed) != 0;
  };
  std::mutex mu;
  absl::Status first_error;
  ParallelFor(todo.size(), o.jobs, [&](size_t i) {
    const Point& p = todo[i];
    if (interrupted()) {
      std::lock_guard<std::mutex> lock(mu);
      ++stats.not_run;
      return;
    }
    absl::StatusOr<Json> summary = RunPoint(scenario, p, o.include_wall_time, interrupt);
    absl::Status s = summary.status();
    if (s.ok() && summary->contains("partial")) {
      // Stopped by a signal: a point file is a finished point or nothing.
      std::lock_guard<std::mutex> lock(mu);
      ++stats.not_run;
      return;
    }
    bool overloaded = false;
    if (s.ok()) {
      overloaded = summary->value("overloaded", false);
      Json doc;
      doc["scenario"] = scenario.name;
      doc["grid_size"] = scenario.points.size();
      doc["index"] = p.index;
      doc["id"] = p.id;
      doc["axes"] = p.axes;
      doc["values"] = p.values;
      doc["result"] = *std::move(summary);
      s = WriteFileAtomically((points_dir / PointFileName(p)).string(), doc.dump(2) + "\n");
    }
    std::lock_guard<std::mutex> lock(mu);
    if (!s.ok()) {
      if (first_error.ok()) {
        first_error = absl::Status(s.code(), absl::StrCat("point ", p.index, " (", p.id,
                                                          "): ", AbslView(StdView(s.message()))));
      }
    } else {
      ++stats.run;
      if (overloaded) ++stats.overloaded;
      if (on_point_done) on_point_done(p, overloaded);
    }
  });
  if (!first_error.ok()) return first_error;
  stats.interrupt_signal = interrupt != nullptr ? interrupt->load(std::memory_order_relaxed) : 0;
  PREFIXSIM_RETURN_IF_ERROR(MergeSweepDirs({o.out_dir}, o.out_dir, /*require_complete=*/false));
  return stats;
}

}  // namespace prefixsim::grid
