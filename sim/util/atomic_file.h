// Every file prefixsim writes (reports, traces, analyses, sweep point files) goes through here:
// the contents go to a temp file in the destination's folder, which is renamed over the
// destination only once it is complete. An interrupted or failed run therefore never leaves a
// partial file behind: the destination is either untouched or whole, and the temp file is
// removed on failure. Paths are file paths only; the CLI maps "-" to stdout itself.
#ifndef PREFIXSIM_SIM_UTIL_ATOMIC_FILE_H_
#define PREFIXSIM_SIM_UTIL_ATOMIC_FILE_H_

#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace prefixsim {

// Writes `contents` to a fresh temp file next to `path`, then renames it to `path`. If the write
// or the rename fails, the temp file is removed, `path` is left as it was, and the error is
// returned (InvalidArgument naming the path for an unwritable destination).
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

// An output written as a stream over a run (the streamed per-request CSV) and published the
// same way: Commit() renames the temp file over the destination; destroyed without a Commit()
// (an error, an interruption) it removes the temp file.
class AtomicFileWriter {
 public:
  // InvalidArgument (naming the path) if the temp file cannot be created.
  static absl::StatusOr<std::unique_ptr<AtomicFileWriter>> Open(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  std::ostream& stream() { return file_; }
  // Flushes and renames the temp file over the destination; on failure the temp file is gone
  // and the destination untouched.
  absl::Status Commit();

 private:
  AtomicFileWriter() = default;
  std::string path_, temp_path_;
  std::ofstream file_;
  bool committed_ = false;
};

// Checks, before a long run, that an output file can be written the way WriteFileAtomically
// writes it: `path` is not a directory, its folder exists, and a temp file can be created there
// (one is created and removed at once, so nothing is left behind). "" and "-" pass.
// InvalidArgument "<flag> <path>: <why>".
absl::Status CheckOutputFile(const std::string& path, std::string_view flag);

// The same for an output directory that the run creates or fills (a sweep's output directory): an
// existing `path` must be a writable directory, otherwise its closest existing ancestor must be
// one.
absl::Status CheckOutputDir(const std::string& path, std::string_view flag);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_UTIL_ATOMIC_FILE_H_
