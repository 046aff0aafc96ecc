#include "sim/util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
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

// Creates and removes a temp file in `folder`, as CreateTempFile does next to a destination:
// the one test of writability that holds for root, read-only mounts and ACLs alike.
absl::Status CheckWritableFolder(const std::filesystem::path& folder, const std::string& path,
                                 std::string_view flag) {
  static std::atomic<uint64_t> counter{0};
  const std::string probe =
      (folder / absl::StrCat(".prefixsim-check.tmp-", ::getpid(), "-", counter.fetch_add(1)))
          .string();
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(AbslView(flag), " ", path, ": cannot write in ",
                                                   folder.string(), ": ", std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckOutputFile(const std::string& path, std::string_view flag) {
  namespace fs = std::filesystem;
  if (path.empty() || path == "-") return absl::OkStatus();
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(flag), " ", path, ": is a directory (give a file name)"));
  }
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  if (!fs::is_directory(folder, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(flag), " ", path, ": folder ", folder.string(),
                     fs::exists(folder, ec) ? " is not a directory" : " does not exist"));
  }
  return CheckWritableFolder(folder, path, flag);
}

absl::Status CheckOutputDir(const std::string& path, std::string_view flag) {
  namespace fs = std::filesystem;
  if (path.empty()) return absl::OkStatus();
  std::error_code ec;
  fs::path folder = fs::absolute(fs::path(path), ec).lexically_normal();
  if (!folder.has_filename() && folder.has_parent_path()) folder = folder.parent_path();  // "dir/"
  // The run creates the missing part of the path: its closest existing ancestor must take it.
  while (!fs::exists(folder, ec) && folder.has_parent_path() && folder != folder.parent_path()) {
    folder = folder.parent_path();
  }
  if (!fs::is_directory(folder, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(flag), " ", path, ": ", folder.string(), " is not a directory"));
  }
  return CheckWritableFolder(folder, path, flag);
}

absl::StatusOr<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Open(const std::string& path) {
  std::unique_ptr<AtomicFileWriter> f(new AtomicFileWriter());
  f->path_ = path;
  std::string temp;
  if (absl::Status created = CreateTempFile(path, &temp); !created.ok()) return created;
  f->temp_path_ = temp;
  f->file_.open(temp, std::ios::binary | std::ios::trunc);
  if (!f->file_) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open for writing"));
  return f;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!temp_path_.empty() && !committed_) {
    file_.close();
    std::remove(temp_path_.c_str());
  }
}

absl::Status AtomicFileWriter::Commit() {
  file_.close();
  if (!file_) return absl::InternalError(absl::StrCat(path_, ": write failed"));
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": cannot write: ", std::strerror(errno)));
  }
  committed_ = true;
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> file, AtomicFileWriter::Open(path));
  file->stream().write(contents.data(), static_cast<std::streamsize>(contents.size()));
  return file->Commit();  // the destructor removes the temp file on any error
}

}  // namespace prefixsim
