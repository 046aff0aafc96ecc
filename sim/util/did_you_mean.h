// Suggestions for a mistyped name (a subcommand, a flag, a preset, a policy, a router, a trace
// format): the known names closest to it by edit distance.
#ifndef PREFIXSIM_SIM_UTIL_DID_YOU_MEAN_H_
#define PREFIXSIM_SIM_UTIL_DID_YOU_MEAN_H_

#include <string>
#include <string_view>
#include <vector>

namespace prefixsim {

// Optimal string alignment distance (insertions, deletions, substitutions and transpositions of
// adjacent characters), ignoring ASCII case.
int EditDistance(std::string_view a, std::string_view b);

// The known names close enough to `name` to be what was meant, closest first, at most
// `max_results`: those within an edit distance that grows with the name's length (typos) and
// within 1 of the closest; failing those, the names that contain `name` or that `name` contains
// (shortened preset names). Empty if none.
std::vector<std::string> ClosestNames(std::string_view name, const std::vector<std::string>& known,
                                      size_t max_results = 3);

// "; did you mean 'x'?" or "; did you mean 'x' or 'y'?", "" without a close name.
std::string DidYouMean(std::string_view name, const std::vector<std::string>& known);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_UTIL_DID_YOU_MEAN_H_
