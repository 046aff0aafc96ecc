// Exit codes of the CLI (docs/design.md §4.1): how a status maps to the process's exit status.
#ifndef PREFIXSIM_SIM_CLI_EXIT_CODES_H_
#define PREFIXSIM_SIM_CLI_EXIT_CODES_H_

#include "absl/status/status.h"

namespace prefixsim {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeFailure = 1;
inline constexpr int kExitBadInput = 2;

// Bad input (config, trace, flag values) is InvalidArgument or NotFound; everything else maps to
// a runtime failure.
inline int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return kExitBadInput;
    default:
      return kExitRuntimeFailure;
  }
}

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_CLI_EXIT_CODES_H_
