// What a consumer of KV events knows of an engine's cache: the blocks stored and not yet removed,
// per group, counted (vLLM does not de-duplicate: two blocks may be cached under one hash, and
// each is stored and removed on its own). A router's view of a replica, kept only from the events:
// the GPU pool's; events of offload tiers (medium other than GPU) are left out.
#ifndef PREFIXSIM_SIM_EVENTS_CACHED_BLOCKS_H_
#define PREFIXSIM_SIM_EVENTS_CACHED_BLOCKS_H_

#include <cstdint>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "sim/events/kv_events.h"

namespace prefixsim::events {

class CachedBlocks {
 public:
  // (group, block hash) -> blocks cached under it. Events without group_idx count as group 0.
  using Key = std::pair<int64_t, ExternalBlockHash>;

  // Applies a batch in order. A remove of a block that is not cached is an error
  // (FailedPrecondition naming the event), and the batch is then applied up to it.
  absl::Status Apply(const EventBatch& batch);

  const std::map<Key, int64_t>& blocks() const { return blocks_; }
  bool operator==(const CachedBlocks& o) const { return blocks_ == o.blocks_; }

 private:
  std::map<Key, int64_t> blocks_;
};

}  // namespace prefixsim::events

#endif  // PREFIXSIM_SIM_EVENTS_CACHED_BLOCKS_H_
