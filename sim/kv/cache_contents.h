// What a KvCacheManager's prefix index holds, block by block: the truth that an exporter of its
// cache events (sim/events) is checked against. Reads every block: for tests and tools only.
#ifndef PREFIXSIM_SIM_KV_CACHE_CONTENTS_H_
#define PREFIXSIM_SIM_KV_CACHE_CONTENTS_H_

#include <utility>
#include <vector>

#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/request.h"

namespace prefixsim::kv {

// (group, hash) of every cached block, one entry per block (duplicates included), in block order.
std::vector<std::pair<int, ChunkHash>> CachedBlockList(const KvCacheManager& manager);

}  // namespace prefixsim::kv

#endif  // PREFIXSIM_SIM_KV_CACHE_CONTENTS_H_
