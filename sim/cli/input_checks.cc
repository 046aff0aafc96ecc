#include "sim/cli/input_checks.h"

#include <sys/stat.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "prefixsim/status.h"

namespace prefixsim::cli {

absl::Status CheckTraceInput(std::string_view path, const TraceOptions& options) {
  const std::string p(path);
  // Standard input can be read once only: the replay itself reports its errors.
  if (p == "-") return absl::OkStatus();
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(p, ": no such file (--trace)"));
  }
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(p, ": is a directory, not a trace file (--trace)"));
  }
  PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, OpenTrace(p, options));
  Request first;
  absl::StatusOr<bool> read = reader->Next(&first);
  return read.status();
}

absl::StatusOr<KvPlan> ResolvePlanForServing(const ModelSpec& model, const EngineConfig& engine,
                                             std::string_view policy) {
  PREFIXSIM_ASSIGN_OR_RETURN(KvPlan plan, ResolveKvPlan(model, engine, policy));
  PREFIXSIM_RETURN_IF_ERROR(CheckStartupMemory(plan));
  return plan;
}

}  // namespace prefixsim::cli
