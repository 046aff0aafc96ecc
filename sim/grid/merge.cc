#include "sim/grid/merge.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/grid/point_config.h"
#include "sim/util/atomic_file.h"
#include "sim/util/status_macros.h"

namespace prefixsim::grid {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

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
      PREFIXSIM_RETURN_IF_ERROR(WriteFileAtomically(target.string(), texts[index]));
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
  for (const auto& a : axes) absl::StrAppend(&csv, ",", CsvEscape(a));
  for (const auto& m : metrics) absl::StrAppend(&csv, ",", CsvEscape(m));
  csv += "\n";
  for (const auto& row : rows) {
    csv += absl::StrCat(row["index"].get<int64_t>(), ",", row["id"].get<std::string>());
    for (const auto& a : axes) {
      absl::StrAppend(&csv, ",",
                      CsvEscape(row["values"].contains(a) ? CellText(row["values"][a]) : ""));
    }
    for (const auto& m : metrics) {
      absl::StrAppend(&csv, ",",
                      CsvEscape(row["metrics"].contains(m) ? CellText(row["metrics"][m]) : ""));
    }
    csv += "\n";
  }
  PREFIXSIM_RETURN_IF_ERROR(
      WriteFileAtomically((fs::path(out_dir) / "results.json").string(), results.dump(2) + "\n"));
  PREFIXSIM_RETURN_IF_ERROR(WriteFileAtomically((fs::path(out_dir) / "results.csv").string(), csv));
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
