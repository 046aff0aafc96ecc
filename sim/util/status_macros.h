// Status helpers. Debian's Abseil (20220623) has no RETURN_IF_ERROR or CHECK, so prefixsim
// carries its own small macros.
#ifndef PREFIXSIM_SIM_UTIL_STATUS_MACROS_H_
#define PREFIXSIM_SIM_UTIL_STATUS_MACROS_H_

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define PREFIXSIM_CONCAT_INNER_(a, b) a##b
#define PREFIXSIM_CONCAT_(a, b) PREFIXSIM_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` yields a non-OK absl::Status.
#define PREFIXSIM_RETURN_IF_ERROR(expr)                    \
  do {                                                     \
    ::absl::Status prefixsim_status_ = (expr);             \
    if (!prefixsim_status_.ok()) return prefixsim_status_; \
  } while (false)

// `lhs` = value of the absl::StatusOr `expr`, or returns its error.
#define PREFIXSIM_ASSIGN_OR_RETURN(lhs, expr) \
  PREFIXSIM_ASSIGN_OR_RETURN_IMPL_(PREFIXSIM_CONCAT_(prefixsim_statusor_, __LINE__), lhs, expr)
#define PREFIXSIM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) return tmp.status();                    \
  lhs = std::move(tmp).value()

// Broken invariants inside the engine are bugs, not input errors: abort with file:line.
#define PREFIXSIM_CHECK(cond)                                                             \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (false)

// PREFIXSIM_CHECK with what the caller did wrong: `message` (anything absl::StrCat takes, in
// parentheses) is built only when `cond` fails.
#define PREFIXSIM_CHECK_MSG(cond, message)                                                   \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: invariant violated: %s: %s\n", __FILE__, __LINE__, #cond, \
                   ::absl::StrCat message.c_str());                                          \
      std::abort();                                                                          \
    }                                                                                        \
  } while (false)

#ifdef NDEBUG
#define PREFIXSIM_DCHECK(cond) \
  do {                         \
  } while (false)
#else
#define PREFIXSIM_DCHECK(cond) PREFIXSIM_CHECK(cond)
#endif

namespace prefixsim {

// Built with AddressSanitizer (GCC's macro; clang's feature test): LeakSanitizer reports memory
// left to the exit, and whole-trace runs are too slow to be tests there.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif
#else
inline constexpr bool kSanitizerBuild = false;
#endif

// Debian's Abseil is built with its own absl::string_view (not an alias of std::string_view), so
// StrCat/StrFormat/Status messages need explicit conversions at the boundary.
inline absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}
inline std::string_view StdView(absl::string_view s) {
  return std::string_view(s.data(), s.size());
}

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_UTIL_STATUS_MACROS_H_
