// An output file written as a stream and published atomically: rows go to a temporary file in
// the destination's folder, renamed over the destination by Commit(); dropped without Commit()
// (an error, an interruption) it removes the temporary and leaves no partial file. "-" streams
// to stdout.
#ifndef PREFIXSIM_SIM_CLI_STREAMED_FILE_H_
#define PREFIXSIM_SIM_CLI_STREAMED_FILE_H_

#include <fstream>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace prefixsim::cli {

class StreamedFile {
 public:
  // InvalidArgument (naming the path) if the temporary cannot be created.
  static absl::StatusOr<std::unique_ptr<StreamedFile>> Open(const std::string& path);
  ~StreamedFile();

  std::ostream& stream();
  // Flushes and renames the temporary over the destination.
  absl::Status Commit();

 private:
  StreamedFile() = default;
  std::string path_, temp_path_;
  std::ofstream file_;
  bool committed_ = false;
};

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_STREAMED_FILE_H_
