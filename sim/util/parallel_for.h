// The one thread pool of the project: the grid's points, compare's policies, the HTML page's
// capacity sweep and a fleet's replicas between two arrivals all run on the same process-wide
// workers, so nested levels (compare's policies, each a fleet) share them instead of multiplying
// threads. Work items are claimed in index order from a shared counter, so a slow item never
// holds up the others, and a result stored at its index does not depend on the number of
// threads.
//
// Threading: ParallelFor may be called from any thread, a pool worker included (a nested call).
// The caller always works on its own items, so a call makes progress even when every worker is
// busy elsewhere; it never runs another call's items, so a short call (a fleet's step phase) is
// never held up behind a long one (a whole replay).
#ifndef PREFIXSIM_SIM_UTIL_PARALLEL_FOR_H_
#define PREFIXSIM_SIM_UTIL_PARALLEL_FOR_H_

#include <cstddef>
#include <functional>

namespace prefixsim {

// Calls fn(i) for every i in [0, n) on at most min(jobs, n) threads, the calling thread one of
// them, the others the pool's workers that are free; returns once every call has returned.
// jobs <= 0: the hardware's concurrency. The pool grows to jobs - 1 workers on first need and
// keeps them. `fn` must be safe to call from several threads at once.
void ParallelFor(size_t n, int jobs, const std::function<void(size_t)>& fn);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_UTIL_PARALLEL_FOR_H_
