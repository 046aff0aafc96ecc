// The KvPlan as JSON (docs/design.md §4.5 kv_plan) and as a readable table.
#ifndef PREFIXSIM_SIM_PLAN_PLAN_FORMAT_H_
#define PREFIXSIM_SIM_PLAN_PLAN_FORMAT_H_

#include <string>

#include "nlohmann/json.hpp"
#include "prefixsim/kv_plan.h"

namespace prefixsim {

nlohmann::ordered_json KvPlanToJson(const KvPlan& plan);
// The startup memory check (docs/semantics.md §1, §6.4): {performed, ok, message,
// max_fitting_model_len}.
nlohmann::ordered_json StartupCheckToJson(const StartupCheck& check);
std::string FormatKvPlan(const KvPlan& plan);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_PLAN_PLAN_FORMAT_H_
