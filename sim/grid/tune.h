// `prefixsim tune` (docs/tune.md): search the KV plan of one model and engine for a trace. Every
// combination of the plan's knobs is resolved as vLLM would resolve it; the feasible, distinct
// plans are ranked by a cheap upper bound (the trace's hit at the plan's alignment, with an
// infinite cache: include/prefixsim/analyze.h), and only the best of them are replayed, by
// successive halving on growing prefixes of the trace. The trace is parsed once, and each prompt
// hashed once per hash unit, for every replay of the search.
#ifndef PREFIXSIM_SIM_GRID_TUNE_H_
#define PREFIXSIM_SIM_GRID_TUNE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "sim/report/report.h"
#include "sim/run/replay.h"

namespace prefixsim::grid {

enum class TuneObjective {
  kHitRate,   // the prefix-cache hit rate of one engine at the engine's memory
  kReplicas,  // the fewest replicas that keep up with the trace within the TTFT SLO
};
std::optional<TuneObjective> ParseTuneObjective(std::string_view name);
std::string_view TuneObjectiveName(TuneObjective objective);

// Which knobs the search varies; a knob left off keeps the engine's value.
struct TuneSpace {
  bool block_size = true;            // engine block_size: the engine's, powers of two, multiples
  bool sliding_window_block = true;  // every kernel block the SWA backend accepts
  bool prefix_match_unit = true;     // divisors of the hash groups' gcd (align-mode mamba only)
  bool retention_interval = true;    // dense, 0 and multiples of S (SWA or mamba groups only)
  // The registered policies the search starts from (each also the baseline of its own plan);
  // empty: every registered policy.
  std::vector<std::string> policies;
};

struct TuneOptions {
  run::ReplayConfig replay;  // model, engine, trace, seed, overrides; threads = the search's
  TuneSpace space;
  TuneObjective objective = TuneObjective::kHitRate;
  // kReplicas: the p99 TTFT the fleet must hold (ms; 0 = the engine's fleet.ttft_slo_ms).
  double ttft_slo_ms = 0;
  int budget = 32;  // candidates replayed at most, the baselines besides
  // Successive halving: rounds on the first 1/eta^(rounds-1), ..., 1/eta, all of the trace, each
  // keeping the better 1/eta (at least `finalists`) for the next.
  int rounds = 4;
  int eta = 3;
  int finalists = 3;
  // The trace is held in memory for the search when its requests take at most this many bytes
  // (beyond it every replay parses the file again), and each prompt's hashes per hash unit while
  // they fit in what is left (beyond it each replay hashes the prompts itself).
  int64_t trace_memory_bytes = int64_t{4} << 30;
  // Resume file (JSON lines, one per finished replay; "" = none): replays already in it are read
  // back instead of run again.
  std::string state_path;
};

// One point of the search space.
struct TuneChoice {
  std::string policy;                       // the registered policy the candidate starts from
  std::optional<int> block_size;            // nullopt: the engine's
  std::optional<int> sliding_window_block;  // nullopt: the policy's choice
  std::optional<int> prefix_match_unit;     // nullopt: the engine's
  std::optional<RetentionInterval> retention_interval;  // nullopt: the engine's
};

struct TuneCandidate {
  TuneChoice choice;
  std::string label;      // "new", "new block_size=3072 retention=0", "swa=1536", ...
  bool baseline = false;  // a starting policy with the engine as given
  KvPlan plan;
  // The cheap ranking: the trace's hit tokens at the plan's alignment A with an infinite cache
  // and the last prompt token recomputed (analyze's alignment curve), and its share of the
  // trace's prompt tokens; padding's share of a block; max_model_len requests the pool holds.
  int64_t bound_hit_tokens = 0;
  double bound_hit_rate = 0;
  double memory_waste = 0;
  double pool_max_len_requests = 0;
  int rank = 0;  // 1-based position in the cheap ranking
  // The last (largest) replay: requests replayed, vLLM's hit rate and its tokens (a fleet's, on
  // TuneResult::round_replicas engines).
  int64_t replayed_requests = 0;
  double hit_rate = 0;
  int64_t hit_tokens = 0;
  int64_t query_tokens = 0;
  double ttft_p99_ms = 0;
  bool overloaded = false;
  // kReplicas: the fleet auto-sizing found this many replicas (0: not sized), and the GPU-hours
  // per million requests they spend over the trace's span.
  int replicas = 0;
  double gpu_hours_per_million = 0;
  std::string sizing_error;  // why no fleet met the SLO (the sizing's own words), if none did
  bool pareto = false;       // on the front of replayed hit rate vs memory waste
  // How to get this plan from vLLM: its engine arguments (field, value; a front end spells them
  // as vLLM's flags), and what no argument can set.
  std::vector<std::pair<std::string, std::string>> vllm_args;
  std::string vllm_note;
  // The replay options that give this plan on top of the options' engine (`policy` names a
  // registered policy, or for a forced SWA block the policy file swa<N>.json that
  // TunedPolicyJson writes).
  std::vector<std::pair<std::string, std::string>> replay_options;
};

struct TuneResult {
  TuneObjective objective = TuneObjective::kHitRate;
  double ttft_slo_ms = 0;
  int64_t trace_requests = 0;
  // Replicas each plan ran on in the halving rounds: 1, or with objective replicas the fleet the
  // first baseline needs for the SLO.
  int round_replicas = 1;
  int64_t trace_prompt_tokens = 0;
  bool trace_in_memory = false;
  int64_t considered = 0;                 // combinations of the knobs
  int64_t duplicates = 0;                 // resolved to a plan another combination already gave
  std::map<std::string, int64_t> pruned;  // why, -> how many
  std::vector<std::string> notes;         // baselines that resolve to the same plan
  int64_t replays = 0;                    // replays run (resumed ones not counted)
  int64_t resumed_replays = 0;
  // Replays where the replay hit more than the bound: the bound's guarantee failed (the trace
  // repeats earlier outputs in later prompts; docs/tune.md).
  int64_t bound_exceeded = 0;
  // Plans whose last replay fell behind the trace (ReplayResult::overloaded): their hit rates
  // reflect the queue as much as the plan.
  int64_t overloaded = 0;
  // Plans never replayed whose bound exceeds the recommended plan's replayed hit: only these
  // could still beat it (every replay stays within its bound), so 0 means the budget sufficed.
  int64_t unreplayed_above_best = 0;
  // Every feasible, distinct candidate: the replayed ones first, best first by the objective,
  // then the rest in cheap-ranking order.
  std::vector<TuneCandidate> candidates;
  size_t best = 0;  // index into candidates of the recommended plan
};

// Runs the search. `interrupt` (may be null): stops at the next replay once it reads non-zero.
// `progress` (may be empty): one line per phase.
absl::StatusOr<TuneResult> RunTune(const TuneOptions& options, const std::atomic<int>* interrupt,
                                   const std::function<void(const std::string&)>& progress = {});

// The engine a candidate replays with: `base` with the candidate's knobs set.
EngineConfig TunedEngine(const EngineConfig& base, const TuneCandidate& c);

// What the HTML page's section shows (sim/report/report.h), the first `rows` plans.
TuneFigures TuneFiguresOf(const TuneResult& result, size_t rows);

// The ranked table for the terminal; `top` rows at most (the baselines always shown).
std::string TuneResultText(const TuneResult& result, int top);
nlohmann::ordered_json TuneResultJson(const TuneResult& result, int top);

// The engine JSON that realises candidate `c`: the options' engine file with block_size,
// prefix_match_unit and prefix_cache_retention_interval set as the candidate has them; and the
// policy file (policy.h) that gives its SWA block ("" when the plan has no SWA group).
absl::StatusOr<std::string> TunedEngineJson(const TuneOptions& options, const TuneCandidate& c);
std::string TunedPolicyJson(const TuneCandidate& c);

// A sweep scenario (docs/scenarios.md) with one point per plan shown (`top` rows, baselines
// included), each a replay of the whole trace, so that the plans run as a sweep, on Slurm where
// there are many. A plan with a forced SWA block names the policy file
// `policy_dir`/swa<N>.json, which the caller writes (TunedPolicyJson). Of the command-line
// overrides, kv_cache_bytes, num_gpu_blocks, max_model_len, router and time_scale are carried.
nlohmann::ordered_json TuneScenarioJson(const TuneOptions& options, const TuneResult& result,
                                        int top, const std::string& policy_dir);

}  // namespace prefixsim::grid

#endif  // PREFIXSIM_SIM_GRID_TUNE_H_
