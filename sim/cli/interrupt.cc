#include "sim/cli/interrupt.h"

#include <signal.h>

namespace prefixsim::cli {
namespace {

// Lock-free, so setting it is async-signal-safe.
std::atomic<int> g_interrupt{0};
static_assert(std::atomic<int>::is_always_lock_free);

void OnSignal(int sig) {
  int expected = 0;
  if (!g_interrupt.compare_exchange_strong(expected, sig)) {
    // The second signal: the user insists. Die of it, as without a handler.
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

}  // namespace

void InstallInterruptHandlers() {
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  // Interrupted reads resume: the run stops at its next event, not with an I/O error.
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

const std::atomic<int>* InterruptFlag() { return &g_interrupt; }

}  // namespace prefixsim::cli
