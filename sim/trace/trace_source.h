// OpenTrace over bytes that do not come from a file: the records a program holds in memory (the
// Python module's traces given as dicts, python/core/). Same formats, detection, options and
// errors as OpenTrace; `name` stands where a path would in error messages ("name:3: field ...").
#ifndef PREFIXSIM_SIM_TRACE_TRACE_SOURCE_H_
#define PREFIXSIM_SIM_TRACE_TRACE_SOURCE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prefixsim/trace.h"
#include "sim/trace/line_reader.h"

namespace prefixsim {

absl::StatusOr<std::unique_ptr<TraceReader>> OpenTraceFromSource(std::string name,
                                                                 std::unique_ptr<ByteSource> source,
                                                                 const TraceOptions& options = {});

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_TRACE_TRACE_SOURCE_H_
