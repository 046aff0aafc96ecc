// What a listener of a KV cache's prefix index receives (KvCacheManager::SetCacheEventListener).
#ifndef PREFIXSIM_CACHE_EVENT_LISTENER_H_
#define PREFIXSIM_CACHE_EVENT_LISTENER_H_

#include <cstdint>

namespace prefixsim {

// Store/remove events of a cache's prefix index, as vLLM publishes KV events (BlockStored,
// BlockRemoved) for routers to consume. One event per block published under a key and per block
// whose key is dropped (evicted, or re-keyed); a key names (group, block hash), and `tag`
// verifies it. Keys are opaque to listeners; `group` (an index into KvPlan::groups) says whose
// block it is, for listeners that see only some groups, as routers that index attention only do.
class CacheEventListener {
 public:
  virtual ~CacheEventListener() = default;
  virtual void OnBlockStored(uint64_t key, uint32_t tag, int group) = 0;
  virtual void OnBlockRemoved(uint64_t key, int group) = 0;
};

}  // namespace prefixsim

#endif  // PREFIXSIM_CACHE_EVENT_LISTENER_H_
