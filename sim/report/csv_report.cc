#include "absl/strings/str_format.h"
#include "sim/report/report.h"

namespace prefixsim {
namespace {

std::string Ms(int64_t ns) {
  return ns < 0 ? "" : absl::StrFormat("%.3f", static_cast<double>(ns) / 1e6);
}

// The miss-cause columns, after the others: the main cause, then tokens per cause but the hit
// (hit_tokens has it).
void WriteMissHeader(std::ostream& out) {
  out << ",miss_cause";
  for (int c = 1; c < kNumMissCauses; ++c) {
    out << "," << MissCauseName(static_cast<MissCause>(c)) << "_tokens";
  }
}

// A request never looked up, or a run without miss attribution, has no causes: empty cells, not
// zeros a reader would sum as "no miss".
void WriteMissColumns(const MissAttribution& m, std::ostream& out) {
  if (m.total() == 0) {
    for (int c = 0; c < kNumMissCauses; ++c) out << ",";
    return;
  }
  out << "," << MissCauseName(m.main_cause());
  for (int c = 1; c < kNumMissCauses; ++c) out << "," << m.tokens[c];
}

}  // namespace

void WriteRequestsCsvHeader(bool fleet, std::ostream& out) {
  out << "id,arrival_s,prompt_tokens,output_tokens,hit_tokens,alignment_loss_tokens,"
         "lost_to_alignment_tokens,ttft_ms,e2e_ms,preemptions,readmission_hit_tokens,skipped";
  WriteMissHeader(out);
  // A fleet adds the replica that held what was missed as `elsewhere`, the one that served, and
  // the router's regret.
  out << (fleet ? ",elsewhere_replica,replica,routing_regret_tokens\n" : "\n");
}

void WriteRequestCsvRow(const RequestRecord& r, bool fleet, std::ostream& out) {
  const bool served = r.finish_ns >= 0;
  out << absl::StrFormat("%d,%.6f,%d,%d,%d,%d,%d,%s,%s,%d,%d,%s", r.id,
                         static_cast<double>(r.arrival_ns) / 1e9, r.prompt_tokens, r.output_tokens,
                         r.hit_tokens, r.alignment_loss_tokens, r.lost_to_alignment_tokens,
                         served ? Ms(r.first_token_ns - r.arrival_ns) : "",
                         served ? Ms(r.finish_ns - r.arrival_ns) : "", r.preemptions,
                         r.readmission_hit_tokens, r.skipped);
  WriteMissColumns(r.miss, out);
  if (fleet) {
    out << ",";
    if (r.miss.elsewhere_replica >= 0) out << r.miss.elsewhere_replica;
    out << "," << r.replica << "," << r.routing_regret_tokens;
  }
  out << "\n";
}

void WriteRequestsCsv(const ReplayResult& result, std::ostream& out) {
  // A fleet adds the replica that served each request (one replica: no such column).
  const bool fleet = result.fleet.has_value();
  WriteRequestsCsvHeader(fleet, out);
  for (const RequestRecord& r : result.per_request) WriteRequestCsvRow(r, fleet, out);
}

}  // namespace prefixsim
