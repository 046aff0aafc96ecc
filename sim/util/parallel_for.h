// The one thread pool of the project: the grid's points, compare's policies, the HTML page's
// capacity sweep. Work items are claimed in index order from a shared counter, so a slow item
// never holds up the others, and a result stored at its index does not depend on the number of
// threads.
#ifndef PREFIXSIM_SIM_UTIL_PARALLEL_FOR_H_
#define PREFIXSIM_SIM_UTIL_PARALLEL_FOR_H_

#include <cstddef>
#include <functional>

namespace prefixsim {

// Calls fn(i) for every i in [0, n) on min(jobs, n) threads, the calling thread one of them;
// returns once every call has returned. jobs <= 0: the hardware's concurrency. `fn` must be
// safe to call from several threads at once.
void ParallelFor(size_t n, int jobs, const std::function<void(size_t)>& fn);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_UTIL_PARALLEL_FOR_H_
