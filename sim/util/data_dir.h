// Where the files the binary reads at run time (the presets under configs/, the Slurm job script)
// are found: an installed binary finds them next to itself, a build-tree binary in the source
// tree, and $PREFIXSIM_CONFIG_DIR overrides both (docs/embedding.md).
#ifndef PREFIXSIM_SIM_UTIL_DATA_DIR_H_
#define PREFIXSIM_SIM_UTIL_DATA_DIR_H_

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace prefixsim {

// The data roots, in the order they are searched: $PREFIXSIM_CONFIG_DIR (when set and not
// empty), <directory of `executable`>/../share/prefixsim (the layout CMake's install writes), then
// the source tree this library was built from. Each root holds configs/<kind>/ and scripts/.
std::vector<std::filesystem::path> DataDirsFor(const std::filesystem::path& executable);
// The same for the running program (/proc/self/exe).
std::vector<std::filesystem::path> DataDirs();

// The first <root>/<relative> that exists, for `relative` such as "configs/models/x.json" or
// "scripts/slurm/sweep.sbatch". NotFound names `relative` and every place looked in.
absl::StatusOr<std::filesystem::path> FindDataFileIn(
    std::string_view relative, const std::vector<std::filesystem::path>& roots);
absl::StatusOr<std::filesystem::path> FindDataFile(std::string_view relative);

// "looked in A, B and C": the roots as an error message names them.
std::string LookedIn(const std::vector<std::filesystem::path>& roots);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_UTIL_DATA_DIR_H_
