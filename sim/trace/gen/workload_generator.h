// Reproducible synthetic workloads for `prefixsim gen-trace`: multi-turn chat, agentic tool loops
// and shared-document / few-shot requests, with Poisson or bursty arrivals. All randomness comes
// from one std::mt19937_64 seeded by WorkloadOptions::seed, and the distributions are computed here
// from its raw bits (not std::*_distribution, whose algorithms differ between standard libraries),
// so the same seed gives the same file. (They still use std::log/exp/cos: a libm that rounds
// differently in the last bit could, rarely, change a length by one token on another platform.)
#ifndef PREFIXSIM_SIM_TRACE_GEN_WORKLOAD_GENERATOR_H_
#define PREFIXSIM_SIM_TRACE_GEN_WORKLOAD_GENERATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/request.h"

namespace prefixsim {

struct WorkloadOptions {
  std::string kind = "chat";  // chat | agentic | shared_doc
  uint64_t seed = 1;
  int64_t requests = 300;
  double rate_per_s = 1.0;  // mean request rate (sessions start at rate / turns per session)
  std::string arrival = "poisson";  // poisson | bursty
  int64_t max_prompt_tokens = 65536;
};

// One generated request: virtual content only (pieces of text named by content ids).
struct GeneratedRequest {
  int64_t arrival_ns = 0;
  std::vector<ContentSegment> prompt;
  std::vector<ContentSegment> answer;  // the output's content (reappears in later prompts)
  int64_t output_tokens = 0;
  std::string session_id;  // empty when the kind has no sessions
};

std::vector<std::string> WorkloadKinds();

// Requests sorted by arrival (ties in generation order), exactly options.requests of them.
absl::StatusOr<std::vector<GeneratedRequest>> GenerateWorkload(const WorkloadOptions& options);

// `mooncake` JSONL: each block of block_tokens prompt tokens gets a hash id that names the block
// and its whole prefix (ids numbered by first appearance, as in the Mooncake traces).
std::string FormatMooncakeTrace(const std::vector<GeneratedRequest>& requests,
                                int64_t block_tokens);
// `tokens` JSONL: exact token ids, with the answer as output_token_ids.
std::string FormatTokensTrace(const std::vector<GeneratedRequest>& requests);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_TRACE_GEN_WORKLOAD_GENERATOR_H_
