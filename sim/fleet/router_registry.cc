#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "prefixsim/status.h"
#include "sim/fleet/router.h"
#include "sim/util/did_you_mean.h"

namespace prefixsim {
namespace fleet {
namespace {

using RouterFactory = std::unique_ptr<Router> (*)(const RouterConfig&);

const std::vector<std::pair<std::string_view, RouterFactory>>& Routers() {
  static const auto* routers = new std::vector<std::pair<std::string_view, RouterFactory>>{
      // One line per router.
      {"round_robin", MakeRoundRobinRouter},   {"random", MakeRandomRouter},
      {"least_loaded", MakeLeastLoadedRouter}, {"session", MakeSessionRouter},
      {"kv_aware", MakeKvAwareRouter},         {"kv_aware_unaligned", MakeKvAwareUnalignedRouter},
  };
  return *routers;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Router>> NewRouter(std::string_view name,
                                                  const RouterConfig& config) {
  for (const auto& [router_name, factory] : Routers()) {
    if (router_name == name) return factory(config);
  }
  return absl::NotFoundError(
      absl::StrCat("unknown router '", AbslView(name), "'", DidYouMean(name, RegisteredRouters()),
                   " (registered: ", absl::StrJoin(RegisteredRouters(), ", "), ")"));
}

bool IsRegisteredRouter(std::string_view name) {
  for (const auto& entry : Routers()) {
    if (entry.first == name) return true;
  }
  return false;
}

std::vector<std::string> RegisteredRouters() {
  std::vector<std::string> names;
  for (const auto& entry : Routers()) names.emplace_back(entry.first);
  return names;
}

}  // namespace fleet
}  // namespace prefixsim
