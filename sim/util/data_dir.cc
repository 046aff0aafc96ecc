#include "sim/util/data_dir.h"

#include <cstdlib>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace prefixsim {

namespace fs = std::filesystem;

std::vector<fs::path> DataDirsFor(const fs::path& executable) {
  std::vector<fs::path> roots;
  if (const char* env = std::getenv("PREFIXSIM_CONFIG_DIR"); env != nullptr && *env != '\0') {
    roots.emplace_back(env);
  }
  if (!executable.empty()) {
    roots.push_back((executable.parent_path() / ".." / "share" / "prefixsim").lexically_normal());
  }
  // Only this file sees the source path (CMakeLists.txt): a build-tree binary run from anywhere
  // still finds the presets of its checkout, and nothing else in the library depends on it.
#ifdef PREFIXSIM_SOURCE_DIR
  roots.emplace_back(PREFIXSIM_SOURCE_DIR);
#endif
  return roots;
}

std::vector<fs::path> DataDirs() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) self.clear();  // no /proc: the installed layout cannot be found, the others still can
  return DataDirsFor(self);
}

std::string LookedIn(const std::vector<fs::path>& roots) {
  std::string out = "looked in ";
  for (size_t i = 0; i < roots.size(); ++i) {
    if (i > 0) out += i + 1 == roots.size() ? " and " : ", ";
    out += roots[i].string();
  }
  if (roots.empty()) out += "nowhere";
  return out;
}

absl::StatusOr<fs::path> FindDataFileIn(std::string_view relative,
                                        const std::vector<fs::path>& roots) {
  for (const fs::path& root : roots) {
    fs::path candidate = root / fs::path(std::string(relative));
    std::error_code ec;
    if (fs::exists(candidate, ec)) return candidate;
  }
  return absl::NotFoundError(
      absl::StrCat(std::string(relative), ": not found (", LookedIn(roots),
                   "; set PREFIXSIM_CONFIG_DIR to a directory holding configs/ and scripts/)"));
}

absl::StatusOr<fs::path> FindDataFile(std::string_view relative) {
  return FindDataFileIn(relative, DataDirs());
}

}  // namespace prefixsim
