// The door from sim/kv's internal functions (routing lookups, the fast-path switch) to a
// KvCacheManager's state, which the public header keeps opaque (a private Rep). Only
// kv_cache_manager.cc, where the Rep is defined, can use what it returns.
#ifndef PREFIXSIM_SIM_KV_KV_CACHE_MANAGER_ACCESS_H_
#define PREFIXSIM_SIM_KV_KV_CACHE_MANAGER_ACCESS_H_

#include "prefixsim/kv_cache_manager.h"

namespace prefixsim {

struct KvCacheManagerAccess {
  using Rep = KvCacheManager::Rep;
  static Rep& Get(KvCacheManager& manager) { return *manager.rep_; }
  static const Rep& Get(const KvCacheManager& manager) { return *manager.rep_; }
};

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_KV_CACHE_MANAGER_ACCESS_H_
