#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/fleet/cache_view.h"
#include "sim/kv/routing.h"
#include "sim/util/option_names.h"
#include "sim/util/registry.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace fleet {
namespace {

using ViewFactory = std::unique_ptr<CacheView> (*)(const CacheViewConfig&);

const Registry<ViewFactory>& Views() {
  static const auto* views = [] {
    auto* registry = new Registry<ViewFactory>("router view");
    // One line per view.
    registry->Add("exact", MakeExactView)
        .Add("delayed", MakeDelayedView)
        .Add("lossy", MakeLossyView)
        .Add("attention_only", MakeAttentionOnlyView)
        .Add("approximate", MakeApproximateView);
    return registry;
  }();
  return *views;
}

}  // namespace

void IndexedView::Overlaps(KvCacheManager& any_replica, const Request& request,
                           const std::vector<kv::HashPair>& hashes, int64_t now_ns,
                           std::vector<int64_t>* overlaps) {
  CatchUp(now_ns);
  if (primary_only_) {
    kv::PeekPrimaryOverlaps(any_replica, request, hashes, index_, overlaps, one_walk_);
  } else {
    kv::PeekPromptHits(any_replica, request, hashes, index_, overlaps, one_walk_);
  }
}

absl::StatusOr<std::unique_ptr<CacheView>> NewCacheView(const CacheViewConfig& config) {
  const RouterViewConfig& v = config.view;
  if (!(v.event_delay_ms >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("router view: event delay ", v.event_delay_ms, " ms is negative"));
  }
  if (!(v.event_loss >= 0 && v.event_loss <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("router view: event loss ", v.event_loss, " is not in [0, 1]"));
  }
  if (v.max_blocks < 0 || !(v.ttl_s >= 0)) {
    return absl::InvalidArgumentError("router view: max blocks and TTL must not be negative");
  }
  absl::StatusOr<const ViewFactory*> factory = Views().Lookup(v.kind);
  if (!factory.ok()) return factory.status();
  return (**factory)(config);
}

absl::Status CheckViewKnobs(const RouterViewConfig& v, std::string_view effective_view,
                            std::string_view router) {
  struct Knob {
    const char* field;  // the engine JSON's router.<field>, RouterViewConfig::<field>
    const char* view;
    bool set;
    bool required;  // the view's whole effect: without it the view is the exact one
  };
  const Knob knobs[] = {
      {"router.event_delay_ms", "delayed", v.event_delay_ms != 0, true},
      {"router.event_loss", "lossy", v.event_loss != 0, true},
      {"router.max_blocks", "approximate", v.max_blocks != 0, false},
      {"router.ttl_s", "approximate", v.ttl_s != 0, false},
  };
  for (const Knob& k : knobs) {
    if (!k.required || k.set || effective_view != k.view) continue;
    return absl::InvalidArgumentError(absl::StrCat(OptionName("router.view", k.view), " without ",
                                                   OptionName(k.field), " is the exact view: set ",
                                                   OptionName(k.field), " above 0, or ",
                                                   OptionName("router.view", "exact")));
  }
  for (const Knob& k : knobs) {
    if (!k.set || effective_view == k.view) continue;
    const std::string seen =
        effective_view.empty()
            ? absl::StrCat("router ", std::string(router), " does not read the caches")
            : absl::StrCat("router ", std::string(router), " reads the caches on the ",
                           std::string(effective_view), " view");
    return absl::InvalidArgumentError(
        absl::StrCat(OptionName(k.field), " does nothing here: ", seen, ", and it applies to ",
                     OptionName("router.view", k.view), " only"));
  }
  return absl::OkStatus();
}

std::vector<std::string> RegisteredCacheViews() { return Views().Names(); }

std::optional<std::string> UnknownCacheViewMessage(std::string_view name) {
  if (Views().Contains(name)) return std::nullopt;
  return Views().UnknownNameMessage(name);
}

}  // namespace fleet
}  // namespace prefixsim
