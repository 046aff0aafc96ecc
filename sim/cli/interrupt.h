// SIGINT / SIGTERM for the long-running commands (replay, compare, sweep): the first signal asks
// the replays to stop at their next event (ReplayOptions::interrupt) so that the command can
// report what was simulated, marked partial, write its outputs whole and exit 130; a second
// signal kills the process at once (the default action).
#ifndef PREFIXSIM_SIM_CLI_INTERRUPT_H_
#define PREFIXSIM_SIM_CLI_INTERRUPT_H_

#include <atomic>

namespace prefixsim::cli {

// The exit status of an interrupted run (128 + SIGINT, what shells report for Ctrl-C).
inline constexpr int kExitInterrupted = 130;

// Installs the handlers for the rest of the process (idempotent).
void InstallInterruptHandlers();

// 0, or the number of the first SIGINT/SIGTERM received since the handlers were installed.
const std::atomic<int>* InterruptFlag();
inline int InterruptSignal() { return InterruptFlag()->load(std::memory_order_relaxed); }

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_INTERRUPT_H_
