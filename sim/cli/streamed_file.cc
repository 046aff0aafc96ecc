#include "sim/cli/streamed_file.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"

namespace prefixsim::cli {

absl::StatusOr<std::unique_ptr<StreamedFile>> StreamedFile::Open(const std::string& path) {
  std::unique_ptr<StreamedFile> f(new StreamedFile());
  f->path_ = path;
  if (path == "-") return f;
  f->temp_path_ = absl::StrCat(path, ".tmp.", getpid());
  f->file_.open(f->temp_path_, std::ios::binary | std::ios::trunc);
  if (!f->file_) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open for writing"));
  return f;
}

StreamedFile::~StreamedFile() {
  if (!temp_path_.empty() && !committed_) {
    file_.close();
    std::remove(temp_path_.c_str());
  }
}

std::ostream& StreamedFile::stream() { return temp_path_.empty() ? std::cout : file_; }

absl::Status StreamedFile::Commit() {
  if (temp_path_.empty()) {
    std::cout.flush();
    return absl::OkStatus();
  }
  file_.close();
  if (!file_) return absl::InternalError(absl::StrCat(path_, ": write failed"));
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(path_, ": cannot move the written file into place"));
  }
  committed_ = true;
  return absl::OkStatus();
}

}  // namespace prefixsim::cli
