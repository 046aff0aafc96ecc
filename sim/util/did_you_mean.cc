#include "sim/util/did_you_mean.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sim/util/status_macros.h"

namespace prefixsim {

int EditDistance(std::string_view a_in, std::string_view b_in) {
  const std::string a = absl::AsciiStrToLower(AbslView(a_in));
  const std::string b = absl::AsciiStrToLower(AbslView(b_in));
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::vector<std::string> ClosestNames(std::string_view name, const std::vector<std::string>& known,
                                      size_t max_results) {
  // A third of the name's length, at least 2: "replya" -> "replay" (1), "kv-cache-byte" ->
  // "kv-cache-bytes" (1), while "foo" suggests nothing from a list of unrelated names.
  const int threshold = std::max<int>(2, static_cast<int>(name.size()) / 3);
  std::vector<std::tuple<int, int, std::string>> ranked;  // (tier, distance, name)
  const std::string lower = absl::AsciiStrToLower(AbslView(name));
  for (const std::string& k : known) {
    if (k == name) continue;  // an exact name is never a typo of itself
    const int distance = EditDistance(name, k);
    const std::string lk = absl::AsciiStrToLower(k);
    if (lower.size() >= 3 && absl::StartsWith(lk, lower)) {
      // A name cut short ("kimi-k3" for "kimi-k3-like") beats a one-letter typo ("kimi-k2").
      ranked.emplace_back(0, 0, k);
    } else if (distance <= threshold) {
      ranked.emplace_back(0, distance, k);
    } else if (lower.size() >= 3 &&
               (absl::StrContains(lk, lower) || absl::StrContains(lower, lk))) {
      ranked.emplace_back(1, distance, k);
    }
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  if (ranked.empty()) return out;
  const int best_tier = std::get<0>(ranked.front());
  const int best_distance = std::get<1>(ranked.front());
  for (const auto& [tier, distance, k] : ranked) {
    if (out.size() >= max_results) break;
    // Once there are typo-close names, farther ones are noise: "kv-cache-byte" is
    // "kv-cache-bytes" (1), not also "kv-cache-dtype" (4).
    if (best_tier == 0 && (tier > 0 || distance > best_distance + 1)) break;
    out.push_back(k);
  }
  return out;
}

std::string DidYouMean(std::string_view name, const std::vector<std::string>& known) {
  const std::vector<std::string> close = ClosestNames(name, known);
  if (close.empty()) return "";
  std::string out = "; did you mean ";
  for (size_t i = 0; i < close.size(); ++i) {
    if (i > 0) absl::StrAppend(&out, i + 1 == close.size() ? " or " : ", ");
    absl::StrAppend(&out, "'", close[i], "'");
  }
  return out + "?";
}

}  // namespace prefixsim
