// The length of a run that is known to be a prefix: where every member's predecessors are members
// too (a replica that computed a prompt's block j computed blocks 0..j-1, since blocks are
// chained), the run's end is found by galloping and bisection in O(log n) probes instead of one
// probe per member. Each probe of the callers is a lookup in a map of every block a replay ever
// computed, far larger than the caches, so the probes saved are cache misses saved.
#ifndef PREFIXSIM_SIM_UTIL_PREFIX_RUN_H_
#define PREFIXSIM_SIM_UTIL_PREFIX_RUN_H_

#include <cstdint>

namespace prefixsim {

// The first j in [from, limit) with !member(j), or limit.
// REQUIRES: member is monotone on [from, limit): member(j) implies member(i) for from <= i < j.
template <typename Member>
int64_t PrefixRunEnd(int64_t from, int64_t limit, Member&& member) {
  if (from >= limit || !member(from)) return from;
  int64_t in = from;    // member(in)
  int64_t out = limit;  // !member(out), or limit
  for (int64_t step = 1;; step *= 2) {
    const int64_t probe = in + step;
    if (probe >= limit) break;
    if (!member(probe)) {
      out = probe;
      break;
    }
    in = probe;
  }
  while (out - in > 1) {
    const int64_t mid = in + (out - in) / 2;
    if (member(mid)) {
      in = mid;
    } else {
      out = mid;
    }
  }
  return out;
}

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_UTIL_PREFIX_RUN_H_
