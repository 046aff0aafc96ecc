#include "sim/grid/grid.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/status.h"
#include "sim/cli/atomic_file.h"
#include "sim/cli/common.h"
#include "sim/cli/interrupt.h"
#include "sim/cli/replay_common.h"
#include "sim/grid/point_config.h"
#include "sim/report/report.h"

namespace prefixsim::grid {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string PointFileName(const Point& p) { return absl::StrFormat("%05d-%s.json", p.index, p.id); }

std::string CellText(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  return v.dump();
}

std::string CsvEscape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

}  // namespace

absl::Status ValidatePoints(const Scenario& scenario) {
  for (const Point& p : scenario.points) {
    auto fail = [&](const absl::Status& s) {
      return absl::Status(s.code(),
                          absl::StrCat(scenario.path, ": point ", p.index, " (", p.id, " ",
                                       Canonical(p.values), "): ", AbslView(StdView(s.message()))));
    };
    absl::StatusOr<PointConfig> c = ConfigFor(scenario, p);
    if (!c.ok()) return fail(c.status());
    if (!fs::exists(c->replay.trace)) {
      return fail(
          absl::NotFoundError(absl::StrCat("field trace: ", c->replay.trace, ": no such file")));
    }
    absl::StatusOr<cli::ModelAndEngine> loaded = cli::LoadModelAndEngine(c->replay.model_engine);
    if (!loaded.ok()) return fail(loaded.status());
    absl::StatusOr<KvPlan> plan = ResolveKvPlan(loaded->model, loaded->engine, c->policy);
    if (!plan.ok()) return fail(plan.status());
  }
  return absl::OkStatus();
}

absl::StatusOr<Json> RunPoint(const Scenario& scenario, const Point& point,
                              bool include_wall_time) {
  PREFIXSIM_ASSIGN_OR_RETURN(PointConfig c, ConfigFor(scenario, point));
  PREFIXSIM_ASSIGN_OR_RETURN(cli::ModelAndEngine loaded,
                             cli::LoadModelAndEngine(c.replay.model_engine));
  PREFIXSIM_ASSIGN_OR_RETURN(KvPlan plan, ResolveKvPlan(loaded.model, loaded.engine, c.policy));
  // The one call site of RunReplay in the grid module.
  PREFIXSIM_ASSIGN_OR_RETURN(ReplayResult result,
                             cli::RunReplay(c.replay, loaded.model, loaded.engine, plan, "",
                                            /*keep_records=*/false));
  ReportOptions report;
  report.include_wall_time = include_wall_time;
  return ReplayResultToJson(result, report);
}

const std::vector<std::pair<std::string, std::string>>& HeadlineMetricPointers() {
  static const auto* kMetrics = new std::vector<std::pair<std::string, std::string>>{
      {"hit_rate", "/prefix_cache/hit_rate"},
      {"queries", "/prefix_cache/queries"},
      {"hits", "/prefix_cache/hits"},
      {"hit_alignment", "/kv_plan/hit_alignment"},
      {"scheduler_block_size", "/kv_plan/scheduler_block_size"},
      {"num_blocks", "/kv_plan/num_blocks"},
      {"alignment_loss_tokens", "/alignment_loss_tokens"},
      {"unpublished_alignment_tokens", "/unpublished_alignment_tokens"},
      {"evicted_blocks", "/evicted_blocks"},
      {"preemptions", "/preemptions"},
      {"mean_acceptance_length", "/spec_decode/mean_acceptance_length"},
      {"ttft_mean_ms", "/latency/ttft/mean_ms"},
      {"ttft_p99_ms", "/latency/ttft/p99_ms"},
      {"tpot_p99_ms", "/latency/tpot/p99_ms"},
      {"e2e_p99_ms", "/latency/e2e/p99_ms"},
      {"requests_per_s", "/throughput/requests_per_s"},
      {"sim_time_s", "/sim_time_s"},
      {"wall_time_s", "/wall_time_s"},
  };
  return *kMetrics;
}

Json HeadlineMetrics(const Json& s) {
  Json m = Json::object();
  for (const auto& [name, pointer] : HeadlineMetricPointers()) {
    const Json::json_pointer ptr(pointer);
    if (s.contains(ptr)) m[name] = s.at(ptr);
  }
  return m;
}

Json FleetColumns(const Json& s) {
  Json m = Json::object();
  const Json::json_pointer fleet("/fleet");
  if (s.contains(fleet)) {
    const Json& f = s.at(fleet);
    if (f.contains("replicas")) m["fleet_replicas"] = f["replicas"];
    if (f.contains("router")) m["fleet_router"] = f["router"];
    if (f.contains("imbalance")) m["fleet_imbalance"] = f["imbalance"];
  } else {
    // One engine (the summary has a fleet object only for more than one replica): a fleet of
    // one, no router, evenly loaded, so that the column means the same on every row.
    m["fleet_replicas"] = 1;
    m["fleet_router"] = "";
    m["fleet_imbalance"] = 1.0;
  }
  if (s.contains("lost_to_alignment_tokens")) {
    m["lost_to_alignment_tokens"] = s["lost_to_alignment_tokens"];
  }
  // Point files written before the summary had `overloaded` leave the cell empty.
  if (s.contains("overloaded")) m["overloaded"] = s["overloaded"];
  return m;
}

absl::Status WriteFileAtomic(const std::string& path, const std::string& text) {
  return cli::WriteFileAtomically(path, text);
}

std::vector<absl::StatusOr<Json>> RunPoints(const Scenario& scenario,
                                            const std::vector<Point>& points, int jobs,
                                            bool include_wall_time) {
  std::vector<absl::StatusOr<Json>> results(points.size(), absl::UnknownError("not run"));
  if (jobs <= 0) jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  jobs = std::min<int>(jobs, static_cast<int>(std::max<size_t>(1, points.size())));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < points.size(); i = next++) {
      results[i] = RunPoint(scenario, points[i], include_wall_time);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < jobs; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  return results;
}

absl::StatusOr<SweepStats> RunSweep(const Scenario& scenario, const SweepOptions& o) {
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
            absl::StrCat(file.string(), ": already exists (use --resume to keep finished points)"));
      }
      ++stats.skipped;
      continue;
    }
    todo.push_back(p);
  }
  int jobs = o.jobs;
  if (jobs <= 0) jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  jobs = std::min<int>(jobs, static_cast<int>(std::max<size_t>(1, todo.size())));
  std::atomic<size_t> next{0};
  std::mutex mu;
  absl::Status first_error;
  auto worker = [&] {
    for (size_t i = next++; i < todo.size(); i = next++) {
      const Point& p = todo[i];
      if (cli::InterruptSignal() != 0) {
        std::lock_guard<std::mutex> lock(mu);
        ++stats.not_run;
        continue;
      }
      absl::StatusOr<Json> summary = RunPoint(scenario, p, o.include_wall_time);
      absl::Status s = summary.status();
      if (s.ok() && summary->contains("partial")) {
        // Stopped by a signal: a point file is a finished point or nothing.
        std::lock_guard<std::mutex> lock(mu);
        ++stats.not_run;
        continue;
      }
      if (s.ok()) {
        Json doc;
        doc["scenario"] = scenario.name;
        doc["grid_size"] = scenario.points.size();
        doc["index"] = p.index;
        doc["id"] = p.id;
        doc["axes"] = p.axes;
        doc["values"] = p.values;
        doc["result"] = *std::move(summary);
        s = WriteFileAtomic((points_dir / PointFileName(p)).string(), doc.dump(2) + "\n");
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok()) {
        if (first_error.ok()) {
          first_error = absl::Status(s.code(), absl::StrCat("point ", p.index, " (", p.id,
                                                            "): ", AbslView(StdView(s.message()))));
        }
      } else {
        ++stats.run;
        if (!o.quiet) {
          std::cerr << "sweep: point " << p.index << " (" << p.id << ") done\n";
        }
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < jobs; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  if (!first_error.ok()) return first_error;
  stats.interrupt_signal = cli::InterruptSignal();
  PREFIXSIM_RETURN_IF_ERROR(MergeSweepDirs({o.out_dir}, o.out_dir, /*require_complete=*/false));
  return stats;
}

static absl::Status MergeUnchecked(const std::vector<std::string>& dirs, const std::string& out_dir,
                                   bool require_complete) {
  // index -> (file name, document)
  std::map<int64_t, std::pair<std::string, Json>> points;
  std::map<int64_t, std::string> texts;  // the point files' bytes, copied as they are
  std::string scenario_name;
  int64_t grid_size = -1;
  for (const std::string& dir : dirs) {
    const fs::path pdir = fs::path(dir) / "points";
    if (!fs::is_directory(pdir)) {
      return absl::NotFoundError(
          absl::StrCat(pdir.string(), ": no such directory (not a sweep output)"));
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(pdir)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && name.size() > 5 && name.substr(name.size() - 5) == ".json") {
        files.push_back(e.path());
      }
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      std::string text;
      {
        std::ifstream in(f, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        text = ss.str();
      }
      Json doc;
      try {
        doc = Json::parse(text);
      } catch (const nlohmann::json::exception& e) {
        return absl::InvalidArgumentError(absl::StrCat(f.string(), ": invalid JSON: ", e.what()));
      }
      if (!doc.is_object() || !doc.contains("index") || !doc.contains("scenario") ||
          !doc.contains("result")) {
        return FieldError(f.string(), "index", "not a sweep point file");
      }
      for (const char* key : {"index", "grid_size"}) {
        if (!doc.contains(key) || !doc[key].is_number_integer()) {
          return FieldError(f.string(), key, "expected an integer");
        }
      }
      if (!doc["scenario"].is_string())
        return FieldError(f.string(), "scenario", "expected a string");
      const std::string name = doc["scenario"].get<std::string>();
      if (scenario_name.empty()) scenario_name = name;
      if (name != scenario_name) {
        return FieldError(f.string(), "scenario",
                          absl::StrCat("'", name, "' differs from '", scenario_name, "'"));
      }
      grid_size = doc["grid_size"].get<int64_t>();
      const int64_t index = doc["index"].get<int64_t>();
      auto it = points.find(index);
      if (it != points.end() && it->second.second["id"] != doc["id"]) {
        return FieldError(f.string(), "id", absl::StrCat("point ", index, " has two ids"));
      }
      points[index] = {f.filename().string(), std::move(doc)};
      texts[index] = std::move(text);
    }
  }
  if (require_complete) {
    std::vector<int64_t> missing;
    for (int64_t i = 0; i < grid_size; ++i) {
      if (!points.contains(i)) missing.push_back(i);
    }
    if (grid_size < 0 || !missing.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("merge: incomplete grid: ", missing.size(), " of ", grid_size,
                       " points missing (indices ", absl::StrJoin(missing, ","), ")"));
    }
  }
  const fs::path out_points = fs::path(out_dir) / "points";
  std::error_code ec;
  fs::create_directories(out_points, ec);
  if (ec) return absl::InternalError(absl::StrCat(out_points.string(), ": ", ec.message()));
  // Columns: every axis key (first-seen order over points), then the headline metrics, then the
  // fleet columns (appended after the headline ones, so older readers' columns keep their place).
  std::vector<std::string> axes;
  std::vector<std::string> metrics;
  std::vector<std::string> fleet_metrics;
  Json rows = Json::array();
  for (auto& [index, entry] : points) {
    auto& [name, doc] = entry;
    const fs::path target = out_points / name;
    if (!fs::exists(target)) {
      PREFIXSIM_RETURN_IF_ERROR(WriteFileAtomic(target.string(), texts[index]));
    }
    Json row;
    row["index"] = index;
    row["id"] = doc["id"];
    for (const auto& a : doc["axes"]) {
      const std::string key = a.get<std::string>();
      if (std::find(axes.begin(), axes.end(), key) == axes.end()) axes.push_back(key);
    }
    Json values = Json::object();
    for (const auto& a : doc["axes"])
      values[a.get<std::string>()] = doc["values"][a.get<std::string>()];
    row["values"] = values;
    row["metrics"] = HeadlineMetrics(doc["result"]);
    for (const auto& [k, v] : row["metrics"].items()) {
      if (std::find(metrics.begin(), metrics.end(), k) == metrics.end()) metrics.push_back(k);
    }
    const Json fleet_columns = FleetColumns(doc["result"]);
    for (const auto& [k, v] : fleet_columns.items()) {
      row["metrics"][k] = v;
      if (std::find(fleet_metrics.begin(), fleet_metrics.end(), k) == fleet_metrics.end()) {
        fleet_metrics.push_back(k);
      }
    }
    rows.push_back(std::move(row));
  }
  metrics.insert(metrics.end(), fleet_metrics.begin(), fleet_metrics.end());
  Json results;
  results["scenario"] = scenario_name;
  results["grid_size"] = grid_size;
  results["points"] = rows.size();
  results["axes"] = axes;
  results["rows"] = rows;
  std::string csv = "index,id";
  for (const auto& a : axes) csv += "," + CsvEscape(a);
  for (const auto& m : metrics) csv += "," + CsvEscape(m);
  csv += "\n";
  for (const auto& row : rows) {
    csv += absl::StrCat(row["index"].get<int64_t>(), ",", row["id"].get<std::string>());
    for (const auto& a : axes) {
      csv += "," + CsvEscape(row["values"].contains(a) ? CellText(row["values"][a]) : "");
    }
    for (const auto& m : metrics) {
      csv += "," + CsvEscape(row["metrics"].contains(m) ? CellText(row["metrics"][m]) : "");
    }
    csv += "\n";
  }
  PREFIXSIM_RETURN_IF_ERROR(
      WriteFileAtomic((fs::path(out_dir) / "results.json").string(), results.dump(2) + "\n"));
  PREFIXSIM_RETURN_IF_ERROR(WriteFileAtomic((fs::path(out_dir) / "results.csv").string(), csv));
  return absl::OkStatus();
}

// Point files are JSON written by us, but may have been edited: a field of the
// wrong type is bad input, not a crash.
absl::Status MergeSweepDirs(const std::vector<std::string>& dirs, const std::string& out_dir,
                            bool require_complete) {
  try {
    return MergeUnchecked(dirs, out_dir, require_complete);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("sweep merge: malformed point file in ",
                                                   absl::StrJoin(dirs, " "), ": ", e.what()));
  }
}

}  // namespace prefixsim::grid
