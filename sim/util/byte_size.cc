#include "sim/util/byte_size.h"

#include <cctype>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

struct Unit {
  std::string_view name;  // lower case
  int64_t multiplier;
};

constexpr int64_t kKi = int64_t{1} << 10;
constexpr Unit kUnits[] = {
    {"b", 1},
    {"kib", kKi},
    {"mib", kKi* kKi},
    {"gib", kKi* kKi* kKi},
    {"tib", kKi* kKi* kKi* kKi},
    {"pib", kKi* kKi* kKi* kKi* kKi},
    {"kb", 1000},
    {"mb", 1000 * 1000},
    {"gb", int64_t{1000} * 1000 * 1000},
    {"tb", int64_t{1000} * 1000 * 1000 * 1000},
    {"pb", int64_t{1000} * 1000 * 1000 * 1000 * 1000},
};

absl::Status Bad(std::string_view what, std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(AbslView(what), what.empty() ? "'" : ": '",
                                                 AbslView(text), "' is not a size: ", AbslView(why),
                                                 " (accepted: ", AbslView(kByteSizeForms), ")"));
}

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(std::string_view text, std::string_view what,
                                      const ByteSizeOptions& options) {
  std::string_view s = StdView(absl::StripAsciiWhitespace(AbslView(text)));
  if (s.empty()) return Bad(what, text, "empty");
  if (s.front() == '-') return Bad(what, text, "negative");
  if (s.front() == '+') s.remove_prefix(1);
  // Integer and fraction digits are kept apart and combined in 128-bit integers, so that
  // "1.5TiB" is exact and no double rounding can shift a byte count.
  size_t i = 0;
  std::string_view int_digits, frac_digits;
  while (i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) ++i;
  int_digits = s.substr(0, i);
  bool has_point = false;
  if (i < s.size() && s[i] == '.') {
    has_point = true;
    const size_t start = ++i;
    while (i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) ++i;
    frac_digits = s.substr(start, i - start);
  }
  if (int_digits.empty() && frac_digits.empty()) return Bad(what, text, "no number");
  const std::string_view unit_text =
      StdView(absl::StripLeadingAsciiWhitespace(AbslView(s.substr(i))));
  const std::string unit = absl::AsciiStrToLower(AbslView(unit_text));
  int64_t multiplier = 1;
  if (!unit.empty()) {
    bool found = false;
    for (const Unit& u : kUnits) {
      if (u.name == unit) {
        multiplier = u.multiplier;
        found = true;
      }
    }
    if (!found) return Bad(what, text, absl::StrCat("unknown unit '", AbslView(unit_text), "'"));
  } else if (has_point) {
    return Bad(what, text, "a byte count must be a whole number (or give a unit)");
  }
  constexpr __int128 kMax = std::numeric_limits<int64_t>::max();
  __int128 whole = 0;
  for (char c : int_digits) {
    whole = whole * 10 + (c - '0');
    if (whole * multiplier > kMax) return Bad(what, text, "too large (above 2^63 - 1 bytes)");
  }
  __int128 bytes = whole * multiplier;
  // The fraction's bytes, rounded down: digits beyond 19 cannot change a result below 2^63.
  __int128 frac = 0, scale = 1;
  for (size_t d = 0; d < frac_digits.size() && d < 19; ++d) {
    frac = frac * 10 + (frac_digits[d] - '0');
    scale *= 10;
  }
  bytes += frac * multiplier / scale;
  if (bytes > kMax) return Bad(what, text, "too large (above 2^63 - 1 bytes)");
  if (bytes == 0 && !options.allow_zero) return Bad(what, text, "must be positive");
  return static_cast<int64_t>(bytes);
}

absl::StatusOr<std::vector<int64_t>> ParseByteSizeList(std::string_view list, std::string_view what,
                                                       const ByteSizeOptions& options) {
  std::vector<int64_t> out;
  for (absl::string_view item : absl::StrSplit(AbslView(list), ',', absl::SkipWhitespace())) {
    absl::StatusOr<int64_t> bytes = ParseByteSize(StdView(item), what, options);
    if (!bytes.ok()) return bytes.status();
    out.push_back(*bytes);
  }
  if (out.empty()) return Bad(what, list, "empty list");
  return out;
}

std::string FormatByteSize(int64_t bytes) {
  static constexpr std::string_view kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  std::string_view unit;
  int64_t value = bytes;
  for (std::string_view u : kBinary) {
    if (value == 0 || value % kKi != 0) break;
    value /= kKi;
    unit = u;
  }
  return absl::StrCat(value, AbslView(unit));
}

}  // namespace prefixsim
