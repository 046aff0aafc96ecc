#include "sim/cli/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace prefixsim::cli {
namespace {

// Creates an empty, not yet existing file `<folder>/.<name>.tmp-<pid>-<n>` (O_EXCL, so two runs
// writing the same destination never share a temp file). Mode 0666 before the umask, like a
// plain ofstream would give the destination.
absl::Status CreateTempFile(const std::string& path, std::string* temp) {
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path dest(path);
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string name =
        absl::StrCat(".", dest.filename().string(), ".tmp-", ::getpid(), "-", counter.fetch_add(1));
    *temp = (dest.parent_path() / name).string();
    int fd = ::open(temp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      return absl::OkStatus();
    }
    if (errno != EEXIST) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": cannot open for writing: ", std::strerror(errno)));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(path, ": cannot create a temp file next to it"));
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::function<absl::Status(std::ostream&)>& write) {
  std::string temp;
  if (absl::Status created = CreateTempFile(path, &temp); !created.ok()) return created;
  absl::Status status;
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) {
      status = absl::InvalidArgumentError(absl::StrCat(path, ": cannot open for writing"));
    } else {
      status = write(out);
      out.close();
      if (status.ok() && !out) status = absl::InternalError(absl::StrCat(path, ": write failed"));
    }
  }
  if (status.ok() && std::rename(temp.c_str(), path.c_str()) != 0) {
    status =
        absl::InvalidArgumentError(absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
  }
  if (!status.ok()) std::remove(temp.c_str());
  return status;
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  return WriteFileAtomically(path, [contents](std::ostream& out) {
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    return absl::OkStatus();
  });
}

}  // namespace prefixsim::cli
