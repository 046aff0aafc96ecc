// Debian's Abseil 20220623 is built with its own absl::string_view (not std::string_view), so
// std::string_view must be converted before it is passed to absl string functions.
#ifndef PREFIXSIM_SIM_TRACE_ABSL_COMPAT_H_
#define PREFIXSIM_SIM_TRACE_ABSL_COMPAT_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace prefixsim {

inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_TRACE_ABSL_COMPAT_H_
