// random: a uniformly random replica per request, from its own std::mt19937_64 stream derived
// from the replay's seed (the acceptance model's draws are not disturbed).
#include <random>

#include "sim/fleet/router.h"

namespace prefixsim {
namespace fleet {
namespace {

class RandomRouter final : public Router {
 public:
  explicit RandomRouter(const RouterConfig& config)
      : n_(config.num_replicas), rng_(config.seed ^ 0x5851f42d4c957f2dULL) {}
  std::string_view name() const override { return "random"; }
  int Route(const Request& /*request*/, const FleetView& /*fleet*/) override {
    // Modulo of a 64-bit draw: the bias (< n / 2^64) is far below anything measurable, and unlike
    // std::uniform_int_distribution it is the same on every standard library.
    return static_cast<int>(rng_() % static_cast<uint64_t>(n_));
  }

 private:
  int n_;
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<Router> MakeRandomRouter(const RouterConfig& config) {
  return std::make_unique<RandomRouter>(config);
}

}  // namespace fleet
}  // namespace prefixsim
