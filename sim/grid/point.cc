// One point of a grid: checked before anything runs (ValidatePoints), then run like
// `prefixsim replay` (RunPoint).
#include <atomic>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "prefixsim/kv_plan.h"
#include "sim/grid/grid.h"
#include "sim/grid/point_config.h"
#include "sim/report/report.h"
#include "sim/run/model_engine.h"
#include "sim/run/replay.h"
#include "sim/util/status_macros.h"

namespace prefixsim::grid {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

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
    absl::StatusOr<run::ModelAndEngine> loaded = run::LoadModelAndEngine(c->replay.model_engine);
    if (!loaded.ok()) return fail(loaded.status());
    absl::StatusOr<KvPlan> plan = ResolvePlanForServing(loaded->model, loaded->engine, c->policy);
    if (!plan.ok()) return fail(plan.status());
  }
  return absl::OkStatus();
}

absl::StatusOr<Json> RunPoint(const Scenario& scenario, const Point& point, bool include_wall_time,
                              const std::atomic<int>* interrupt) {
  PREFIXSIM_ASSIGN_OR_RETURN(PointConfig c, ConfigFor(scenario, point));
  PREFIXSIM_ASSIGN_OR_RETURN(run::ModelAndEngine loaded,
                             run::LoadModelAndEngine(c.replay.model_engine));
  PREFIXSIM_ASSIGN_OR_RETURN(KvPlan plan,
                             ResolvePlanForServing(loaded.model, loaded.engine, c.policy));
  // The one call site of RunReplay in the grid module.
  PREFIXSIM_ASSIGN_OR_RETURN(ReplayResult result,
                             run::RunReplay(c.replay, loaded.model, loaded.engine, plan, interrupt,
                                            /*progress=*/{}, /*keep_records=*/false));
  ReportOptions report;
  report.include_wall_time = include_wall_time;
  return ReplayResultToJson(result, report);
}

}  // namespace prefixsim::grid
