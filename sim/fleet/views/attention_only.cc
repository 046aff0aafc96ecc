// attention_only: the router indexes only the attention (full attention and MLA) groups' events
// and counts the run of the primary group's blocks cached from the prompt's start, as NVIDIA
// Dynamo's KV router does for hybrid models (Dynamo #12169): it sees neither the sliding-window
// and mamba groups that veto a hit nor the alignment of a hit to A, so on a hybrid plan it
// over-promises. (The router kv_aware_unaligned is kv_aware on this view.)
#include "sim/fleet/cache_view.h"

namespace prefixsim {
namespace fleet {
namespace {

class AttentionOnlyView final : public IndexedView {
 public:
  explicit AttentionOnlyView(const CacheViewConfig& config)
      : IndexedView(config, /*primary_only=*/true) {
    PREFIXSIM_CHECK(config.plan != nullptr);
    for (const KvGroup& g : config.plan->groups) {
      indexed_.push_back(g.kind == LayerKind::kFullAttention || g.kind == LayerKind::kMla);
    }
  }
  std::string_view name() const override { return "attention_only"; }
  void OnStored(int replica, uint64_t key, uint32_t tag, int group, int64_t /*now_ns*/) override {
    if (indexed_[group]) index_.Store(replica, key, tag);
  }
  void OnRemoved(int replica, uint64_t key, int group, int64_t /*now_ns*/) override {
    if (indexed_[group]) PREFIXSIM_CHECK(index_.Remove(replica, key));
  }

 private:
  std::vector<char> indexed_;  // per group of the plan
};

}  // namespace

std::unique_ptr<CacheView> MakeAttentionOnlyView(const CacheViewConfig& config) {
  return std::make_unique<AttentionOnlyView>(config);
}

}  // namespace fleet
}  // namespace prefixsim
