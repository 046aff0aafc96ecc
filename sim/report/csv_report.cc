#include "absl/strings/ascii.h"
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

RequestCsvLayout RequestCsvLayout::For(const EngineConfig& engine) {
  RequestCsvLayout layout;
  layout.fleet = engine.fleet.replicas > 1 || engine.fleet.auto_replicas;
  if (engine.kv_offload.enabled()) {
    layout.offload_tiers.push_back("CPU");
    for (const SecondaryTierConfig& t : engine.kv_offload.secondary_tiers) {
      layout.offload_tiers.push_back(absl::AsciiStrToUpper(t.type));
    }
  }
  return layout;
}

void WriteRequestsCsvHeader(const RequestCsvLayout& layout, std::ostream& out) {
  const bool fleet = layout.fleet;
  out << "id,arrival_s,prompt_tokens,output_tokens,hit_tokens,alignment_loss_tokens,"
         "lost_to_alignment_tokens,ttft_ms,e2e_ms,preemptions,readmission_hit_tokens,skipped";
  WriteMissHeader(out);
  if (!layout.offload_tiers.empty()) {
    out << ",gpu_hit_tokens";
    for (const std::string& t : layout.offload_tiers)
      out << "," << absl::AsciiStrToLower(t) << "_hit_tokens";
    // Of evicted_tokens: what a tier had stored and dropped, and what none stored.
    out << ",tier_evicted_tokens,tier_not_stored_tokens";
  }
  // A fleet adds the replica that held what was missed as `elsewhere`, the one that served, and
  // the router's regret.
  out << (fleet ? ",elsewhere_replica,replica,routing_regret_tokens\n" : "\n");
}

void WriteRequestCsvRow(const RequestRecord& r, const RequestCsvLayout& layout, std::ostream& out) {
  const bool fleet = layout.fleet;
  const bool served = r.finish_ns >= 0;
  out << absl::StrFormat("%d,%.6f,%d,%d,%d,%d,%d,%s,%s,%d,%d,%s", r.id,
                         static_cast<double>(r.arrival_ns) / 1e9, r.prompt_tokens, r.output_tokens,
                         r.hit_tokens, r.alignment_loss_tokens, r.lost_to_alignment_tokens,
                         served ? Ms(r.first_token_ns - r.arrival_ns) : "",
                         served ? Ms(r.finish_ns - r.arrival_ns) : "", r.preemptions,
                         r.readmission_hit_tokens, r.skipped);
  WriteMissColumns(r.miss, out);
  if (!layout.offload_tiers.empty()) {
    out << "," << r.gpu_hit_tokens;
    for (size_t t = 0; t < layout.offload_tiers.size(); ++t) out << "," << r.tier_hit_tokens[t];
    if (r.miss.total() == 0) {
      out << ",,";
    } else {
      out << "," << r.miss.tier_evicted << "," << r.miss.tier_not_stored;
    }
  }
  if (fleet) {
    out << ",";
    if (r.miss.elsewhere_replica >= 0) out << r.miss.elsewhere_replica;
    out << "," << r.replica << "," << r.routing_regret_tokens;
  }
  out << "\n";
}

void WriteRequestsCsv(const ReplayResult& result, std::ostream& out) {
  // A fleet adds the replica that served each request (one replica: no such column).
  RequestCsvLayout layout;
  layout.fleet = result.fleet.has_value();
  for (const OffloadTierStats& t : result.offload.tiers) layout.offload_tiers.push_back(t.medium);
  WriteRequestsCsvHeader(layout, out);
  for (const RequestRecord& r : result.per_request) WriteRequestCsvRow(r, layout, out);
}

}  // namespace prefixsim
