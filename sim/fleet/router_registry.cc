#include <utility>

#include "sim/fleet/router.h"
#include "sim/util/registry.h"

namespace prefixsim {
namespace fleet {
namespace {

using RouterFactory = std::unique_ptr<Router> (*)(const RouterConfig&);

const Registry<RouterFactory>& Routers() {
  static const auto* routers = [] {
    auto* registry = new Registry<RouterFactory>("router");
    // One line per router.
    registry->Add("round_robin", MakeRoundRobinRouter)
        .Add("random", MakeRandomRouter)
        .Add("least_loaded", MakeLeastLoadedRouter)
        .Add("session", MakeSessionRouter)
        .Add("kv_aware", MakeKvAwareRouter)
        .Add("kv_aware_unaligned", MakeKvAwareUnalignedRouter);
    return registry;
  }();
  return *routers;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Router>> NewRouter(std::string_view name,
                                                  const RouterConfig& config) {
  absl::StatusOr<const RouterFactory*> factory = Routers().Lookup(name);
  if (!factory.ok()) return factory.status();
  return (**factory)(config);
}

std::optional<std::string> UnknownRouterMessage(std::string_view name) {
  if (Routers().Contains(name)) return std::nullopt;
  return Routers().UnknownNameMessage(name);
}

std::vector<std::string> RegisteredRouters() { return Routers().Names(); }

}  // namespace fleet
}  // namespace prefixsim
