// Simulated against measured (`prefixsim parity`, docs/kv-events.md "Parity"): vLLM's prefix-cache
// counters from two Prometheus scrapes, and a recorded KV event log against the simulated one.
#ifndef PREFIXSIM_SIM_EVENTS_PARITY_H_
#define PREFIXSIM_SIM_EVENTS_PARITY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/events/kv_events.h"

namespace prefixsim::events {

// The samples of a Prometheus text exposition: per metric name (a `_total` suffix removed, as the
// exposition of a counter "x" is "x_total"), per label set (sorted, so that the order the
// labels are written in does not matter), the value and the line it was read from.
struct PromSample {
  double value = 0;
  int64_t line = 0;
};
struct PromScrape {
  std::map<std::string, std::map<std::string, PromSample>> series;  // metric -> labels -> sample
  // The metric summed over its label sets; nullopt when the exposition has no sample of it.
  std::optional<double> Sum(std::string_view metric) const;
};
// Errors are InvalidArgument and start with "`name`: line N: ": a malformed line, or a series
// (metric and label set) given twice, which an exposition never does.
absl::StatusOr<PromScrape> ParsePromText(std::string_view contents, std::string_view name);

struct MeasuredHitRate {
  int64_t queries = 0;  // vllm:prefix_cache_queries, after minus before (tokens)
  int64_t hits = 0;     // vllm:prefix_cache_hits, after minus before (tokens)
  double rate() const { return queries > 0 ? static_cast<double>(hits) / queries : 0; }
};
// vLLM's prefix-cache counters between two scrapes. InvalidArgument naming the file (and the
// line of the sample) when what the counters say cannot be a run of one engine: a counter
// missing, a sample that is not a whole finite number of tokens, a series of the first scrape
// gone from the second or lower in it (a restarted engine, swapped files), more hits than
// queries, or no query at all between the scrapes.
absl::StatusOr<MeasuredHitRate> MeasuredFromScrapes(const PromScrape& before,
                                                    std::string_view before_name,
                                                    const PromScrape& after,
                                                    std::string_view after_name);

// Two event histories replayed side by side, step by step (batch i of a replica on each side is
// step i; replicas by data_parallel_rank).
struct GroupDivergence {
  int64_t rank = 0;
  int64_t group = 0;
  int64_t stored_sim = 0, stored_measured = 0;    // blocks stored
  int64_t removed_sim = 0, removed_measured = 0;  // blocks removed
  int64_t stored_sim_only = 0;       // distinct blocks the simulation stored, the engine never
  int64_t stored_measured_only = 0;  // ... and the other way round
  int64_t steps_agreeing = 0;        // steps after which this group's cached sets are equal
};
struct EventDivergence {
  int64_t steps = 0;           // the longer side's steps, summed over replicas
  int64_t steps_agreeing = 0;  // steps after which every group's cached sets are equal
  double agreement() const { return steps > 0 ? static_cast<double>(steps_agreeing) / steps : 1; }
  // The first step (and its replica and group, the lowest on a tie) after which the sets differ.
  std::optional<int64_t> first_divergent_step, first_divergent_rank, first_divergent_group;
  std::vector<GroupDivergence> groups;  // by (rank, group)
  // Per step index (over the replicas): the replicas that have that step, and those whose every
  // group agrees after it (the agreement over time).
  std::vector<int64_t> replicas_at_step, agreeing_at_step;
};
// FailedPrecondition if either history removes a block it never stored.
absl::StatusOr<EventDivergence> CompareEventHistories(const std::vector<EventBatch>& simulated,
                                                      const std::vector<EventBatch>& measured);

// What makes a comparison of the two histories partial or meaningless, one sentence each (empty:
// nothing): an empty log; replicas one side has and the other not; events without group_idx;
// blocks of another size than the simulated plan's group (`group_block_sizes`, by group index);
// and logs that share no block hash at all (a real engine's hashes are seeded and cannot match the
// simulation's: then only the per-group stored and removed counts compare).
std::vector<std::string> ComparabilityWarnings(const std::vector<EventBatch>& simulated,
                                               const std::vector<EventBatch>& measured,
                                               const std::vector<int64_t>& group_block_sizes);

}  // namespace prefixsim::events

#endif  // PREFIXSIM_SIM_EVENTS_PARITY_H_
