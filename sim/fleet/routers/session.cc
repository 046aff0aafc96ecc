// session: sticky by session id through consistent hashing (a ring of kVirtualNodes points per
// replica; a session goes to the first point at or after its hash), so every turn of a
// conversation lands on the replica that holds its prefix, and resizing the fleet moves only
// ~1/N of the sessions. Requests without a session id go to the least loaded replica.
#include <algorithm>
#include <utility>
#include <vector>

#include "sim/fleet/router.h"

namespace prefixsim {
namespace fleet {
namespace {

constexpr int kVirtualNodes = 64;

uint64_t Mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a then a finalizer: stable across platforms and runs.
uint64_t HashString(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return Mix(h);
}

class SessionRouter final : public Router {
 public:
  explicit SessionRouter(const RouterConfig& config) {
    for (int r = 0; r < config.num_replicas; ++r) {
      for (int v = 0; v < kVirtualNodes; ++v) {
        ring_.emplace_back(Mix((static_cast<uint64_t>(r) << 32) | static_cast<uint64_t>(v)), r);
      }
    }
    std::sort(ring_.begin(), ring_.end());
  }
  std::string_view name() const override { return "session"; }
  int Route(const Request& request, const FleetView& fleet) override {
    if (request.session_id.empty()) {
      ++without_session_;
      return LeastLoadedReplica(fleet);
    }
    const uint64_t h = HashString(request.session_id);
    auto it = std::lower_bound(ring_.begin(), ring_.end(), std::make_pair(h, 0));
    if (it == ring_.end()) it = ring_.begin();
    return it->second;
  }
  int64_t fallback_requests() const override { return without_session_; }
  std::string_view fallback() const override {
    return "without a session id went to the least loaded replica";
  }

 private:
  int64_t without_session_ = 0;
  std::vector<std::pair<uint64_t, int>> ring_;  // (point, replica), sorted
};

}  // namespace

std::unique_ptr<Router> MakeSessionRouter(const RouterConfig& config) {
  return std::make_unique<SessionRouter>(config);
}

}  // namespace fleet
}  // namespace prefixsim
