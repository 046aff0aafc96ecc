// The KV manager's fast path on or off, per manager (sim/kv/quiet_ranges.h says what it skips and
// why the result is exact). On by default; off runs every AllocateSlots call in full, the
// reference path that tests compare against (ReplayTuning::kv_fast_path).
#ifndef PREFIXSIM_SIM_KV_FAST_PATH_H_
#define PREFIXSIM_SIM_KV_FAST_PATH_H_

#include "prefixsim/kv_cache_manager.h"

namespace prefixsim {
namespace kv {

// Takes effect from the manager's next AllocateSlots call.
void SetFastPath(KvCacheManager& manager, bool on);

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_FAST_PATH_H_
