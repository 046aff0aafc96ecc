// prefixsim/report.h over the internal writers. The CLI writes its JSON reports through these
// functions too, so an embedder's report equals the CLI's byte for byte.
#include "prefixsim/report.h"
#include "sim/report/report.h"

namespace prefixsim {

std::string ReplayReportJson(const ReplayResult& result, const ReportOptions& options) {
  return ReplayResultToJson(result, options).dump(2) + "\n";
}

std::string ComparisonReportJson(const std::vector<ReplayResult>& results,
                                 const ReportOptions& options) {
  return ComparisonToJson(results, options).dump(2) + "\n";
}

}  // namespace prefixsim
