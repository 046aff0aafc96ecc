// Memory sizes as users write them, for every byte option of every command and every byte field
// of engine JSON and scenario files: "68719476736", "64GiB", "1.5TiB", "512MiB", "4KiB".
//
// Units: B; KiB, MiB, GiB, TiB, PiB are binary (powers of 1024), the way GPU memory and vLLM's
// kv_cache_memory_bytes are counted; KB, MB, GB, TB, PB are decimal (powers of 1000), the way disk
// vendors count. Unit letters are case-insensitive ("64gib" is 64GiB; "64gb" is decimal) and a
// space may separate the number from the unit. A fractional number needs a unit and is rounded
// down to whole bytes. Negative values, zero (unless allowed), junk and values above int64 are
// errors that name the option or field and list the accepted forms.
#ifndef PREFIXSIM_SIM_UTIL_BYTE_SIZE_H_
#define PREFIXSIM_SIM_UTIL_BYTE_SIZE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace prefixsim {

struct ByteSizeOptions {
  bool allow_zero = false;
};

// The accepted forms, for help strings and error messages.
inline constexpr std::string_view kByteSizeForms =
    "bytes (e.g. 68719476736), or a number with a unit: KiB, MiB, GiB, TiB (powers of 1024) or "
    "KB, MB, GB, TB (powers of 1000), e.g. 64GiB, 1.5TiB, 512MiB";

// InvalidArgument "<what>: '<text>' is not a size: <why> (accepted: ...)" on bad input (without
// "<what>: " when `what` is empty, for callers that prefix their own).
absl::StatusOr<int64_t> ParseByteSize(std::string_view text, std::string_view what,
                                      const ByteSizeOptions& options = {});

// "16GiB,64GiB,1TiB": each entry as ParseByteSize; an empty list is an error.
absl::StatusOr<std::vector<int64_t>> ParseByteSizeList(std::string_view list, std::string_view what,
                                                       const ByteSizeOptions& options = {});

// Bytes in the largest binary unit that divides them exactly ("64GiB", "1536MiB", "1000").
std::string FormatByteSize(int64_t bytes);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_UTIL_BYTE_SIZE_H_
