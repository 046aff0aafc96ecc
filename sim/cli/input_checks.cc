#include "sim/cli/input_checks.h"

#include <sys/stat.h>

#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {

absl::Status CheckTraceInput(std::string_view path, const TraceOptions& options,
                             bool* has_prefix_identity) {
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
  if (has_prefix_identity != nullptr) *has_prefix_identity = reader->has_prefix_identity();
  Request first;
  absl::StatusOr<bool> read = reader->Next(&first);
  return read.status();
}

void WarnIfNoPrefixIdentity(std::string_view command, std::string_view trace,
                            bool has_prefix_identity) {
  if (has_prefix_identity) return;
  std::cerr << "prefixsim " << command << ": warning: " << trace
            << " has no prefix identity (lengths only, e.g. the `lengths` CSV format): every "
               "request is unique content, so prefix-cache hit rates are 0 by construction; "
               "use it for arrival and length shaping, and a trace with hash ids or token ids "
               "for hit rates\n";
}

absl::StatusOr<KvPlan> ResolvePlanWarningOfSmallPools(const ModelSpec& model,
                                                      const EngineConfig& engine,
                                                      std::string_view policy) {
  PREFIXSIM_ASSIGN_OR_RETURN(KvPlan plan, ResolvePlanForServing(model, engine, policy));
  if (const std::string warning = SmallPoolWarning(plan); !warning.empty()) {
    std::cerr << "prefixsim: warning: " << warning << "\n";
  }
  return plan;
}

}  // namespace prefixsim::cli
