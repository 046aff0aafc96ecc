// Every file prefixsim writes (reports, traces, analyses) goes through here: the contents go to
// a temp file in the destination's folder, which is renamed over the destination only once it
// is complete. An interrupted or failed run therefore never leaves a partial file behind: the
// destination is either untouched or whole, and the temp file is removed on failure.
#ifndef PREFIXSIM_SIM_CLI_ATOMIC_FILE_H_
#define PREFIXSIM_SIM_CLI_ATOMIC_FILE_H_

#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace prefixsim::cli {

// Calls `write` with a stream on a fresh temp file next to `path`, then renames it to `path`.
// If `write` returns an error, the stream fails, or the rename fails, the temp file is removed,
// `path` is left as it was, and the error is returned (InvalidArgument naming the path for an
// unwritable destination).
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::function<absl::Status(std::ostream&)>& write);
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_ATOMIC_FILE_H_
