#include "sim/grid/tune.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "prefixsim/analyze.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/policy.h"
#include "sim/kv/coordinator.h"
#include "sim/plan/json_config.h"
#include "sim/report/report.h"
#include "sim/util/parallel_for.h"
#include "sim/util/status_macros.h"

namespace prefixsim::grid {
namespace {

// ---------------------------------------------------------------------------------------------
// The trace, parsed once.

// The requests of the trace in memory, and each prompt's hashes at every hash unit a replay of
// the search asked for (computed once per unit, shared by every plan that hashes at it).
class ParsedTrace {
 public:
  std::vector<Request> requests;
  std::string format;
  bool has_prefix_identity = true;
  TraceReadStats stats;

  // Bytes the requests and the hashes may take together (TuneOptions::trace_memory_bytes), and
  // what the requests take.
  int64_t memory_limit = 0;
  int64_t request_bytes = 0;

  // The prompts' hashes at `h`, computed on first use; null when they would not fit the memory
  // limit (the replay's read-ahead thread then hashes each prompt itself).
  const std::vector<PromptHashes>* HashesAt(int64_t h) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = hashes_.find(h); it != hashes_.end()) return &it->second;
    int64_t chunks = 0;
    for (const Request& r : requests) chunks += std::max<int64_t>(0, (r.prompt_tokens - 1) / h);
    const int64_t bytes = chunks * static_cast<int64_t>(sizeof(ChunkHash)) +
                          static_cast<int64_t>(requests.size() * sizeof(PromptHashes));
    if (request_bytes + hash_bytes_ + bytes > memory_limit) return nullptr;
    hash_bytes_ += bytes;
    const auto it = hashes_.try_emplace(h).first;
    it->second.reserve(requests.size());
    for (const Request& r : requests) {
      it->second.push_back(KvCacheManager::PromptHashesAt(r, h));
    }
    return &it->second;
  }

 private:
  std::mutex mu_;
  int64_t hash_bytes_ = 0;
  std::map<int64_t, std::vector<PromptHashes>> hashes_;
};

// Bytes a request holds in memory (its vectors' payloads and the struct).
int64_t RequestBytes(const Request& r) {
  return static_cast<int64_t>(sizeof(Request) + r.prompt.size() * sizeof(ContentSegment) +
                              r.output.size() * sizeof(ContentSegment) +
                              r.literal_tokens.size() * sizeof(uint32_t) + r.session_id.size() +
                              r.accepted_lengths.size() * sizeof(int32_t));
}

// The first `limit` requests of a parsed trace, with their prompts hashed at `h` (0: not).
class ParsedTraceReader : public TraceReader {
 public:
  ParsedTraceReader(const ParsedTrace& trace, const std::vector<PromptHashes>* hashes, size_t limit)
      : trace_(trace), hashes_(hashes), limit_(std::min(limit, trace.requests.size())) {}
  absl::StatusOr<bool> Next(Request* out) override {
    if (next_ >= limit_) return false;
    *out = trace_.requests[next_];
    if (hashes_ != nullptr) out->prompt_hashes = (*hashes_)[next_];
    ++next_;
    return true;
  }
  std::string_view format() const override { return trace_.format; }
  bool has_prefix_identity() const override { return trace_.has_prefix_identity; }
  const TraceReadStats& stats() const override { return trace_.stats; }

 private:
  const ParsedTrace& trace_;
  const std::vector<PromptHashes>* hashes_;
  size_t limit_;
  size_t next_ = 0;
};

// A reader that stops after `limit` requests (the file is parsed again for each replay).
class LimitedReader : public TraceReader {
 public:
  LimitedReader(std::unique_ptr<TraceReader> inner, int64_t limit)
      : inner_(std::move(inner)), limit_(limit) {}
  absl::StatusOr<bool> Next(Request* out) override {
    if (read_ >= limit_) return false;
    PREFIXSIM_ASSIGN_OR_RETURN(const bool more, inner_->Next(out));
    if (more) ++read_;
    return more;
  }
  std::string_view format() const override { return inner_->format(); }
  bool has_prefix_identity() const override { return inner_->has_prefix_identity(); }
  const TraceReadStats& stats() const override { return inner_->stats(); }

 private:
  std::unique_ptr<TraceReader> inner_;
  int64_t limit_;
  int64_t read_ = 0;
};

absl::StatusOr<std::unique_ptr<TraceReader>> OpenConfiguredTrace(const run::ReplayConfig& config) {
  TraceOptions trace_options = config.trace_options;
  trace_options.seed = config.seed;
  if (config.open_trace) return config.open_trace(trace_options);
  return OpenTrace(config.trace, trace_options);
}

// Reads the whole trace once: its requests kept when they fit `memory_bytes`, and in any case
// the analysis the cheap ranking needs, at `alignments`.
struct TraceSurvey {
  std::unique_ptr<ParsedTrace> parsed;  // null: too large to hold
  AnalyzeResult analysis;
};

absl::StatusOr<TraceSurvey> SurveyTrace(const run::ReplayConfig& config,
                                        const std::vector<int64_t>& alignments,
                                        int64_t memory_bytes) {
  PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, OpenConfiguredTrace(config));
  auto parsed = std::make_unique<ParsedTrace>();
  parsed->format = std::string(reader->format());
  parsed->has_prefix_identity = reader->has_prefix_identity();
  int64_t bytes = 0;
  bool keep = true;
  TraceReader* source = reader.get();
  const RequestSource next = [&](Request* out) -> absl::StatusOr<bool> {
    PREFIXSIM_ASSIGN_OR_RETURN(const bool more, source->Next(out));
    if (more && keep) {
      bytes += RequestBytes(*out);
      if (bytes > memory_bytes) {
        keep = false;
        parsed->requests = {};
      } else {
        parsed->requests.push_back(*out);
      }
    }
    return more;
  };
  AnalyzeOptions analyze;
  analyze.alignments = alignments;
  analyze.capacity_curve = false;
  PREFIXSIM_ASSIGN_OR_RETURN(AnalyzeResult analysis, AnalyzeRequestStream(next, analyze));
  parsed->stats = reader->stats();
  parsed->memory_limit = memory_bytes;
  parsed->request_bytes = bytes;
  TraceSurvey survey;
  survey.analysis = std::move(analysis);
  if (keep) survey.parsed = std::move(parsed);
  return survey;
}

// ---------------------------------------------------------------------------------------------
// The search space.

bool HasGroup(const KvPlan& plan, LayerKind kind) {
  return std::any_of(plan.groups.begin(), plan.groups.end(),
                     [kind](const KvGroup& g) { return g.kind == kind; });
}

// Identifies a plan by everything a replay reads from it, so two knob settings that resolve to
// the same plan are replayed once.
std::string PlanSignature(const KvPlan& plan) {
  std::string s;
  for (const KvGroup& g : plan.groups) {
    absl::StrAppend(&s, AbslView(LayerKindName(g.kind)), ":", g.num_layers, "+",
                    g.num_padding_layers, "/", g.block_size, "/", g.kernel_block_size, "/",
                    g.page_bytes, "/", g.prefix_cacheable, g.is_eagle_group,
                    g.num_speculative_blocks, ";");
  }
  absl::StrAppend(&s, plan.scheduler_block_size, ",", plan.hash_block_size, ",", plan.hit_alignment,
                  ",", plan.partial_hits, ",", plan.num_blocks, ",",
                  plan.retention_interval ? std::to_string(*plan.retention_interval) : "dense", ",",
                  plan.full_allocation_fallback);
  return s;
}

// The reason a refused combination is counted under: what vLLM's startup would have said, with
// the numbers taken out so that equal reasons count together.
std::string PruneReason(const absl::Status& status) {
  const std::string m(status.message());
  if (m.find("does not fit") != std::string::npos || m.find("max_model_len") != std::string::npos ||
      m.find("memory") != std::string::npos) {
    return "memory: one max_model_len request does not fit";
  }
  if (m.find("prefix_match_unit") != std::string::npos) {
    return "prefix_match_unit does not divide every hashed group's block";
  }
  if (m.find("retention") != std::string::npos) {
    return "retention interval not accepted for this plan";
  }
  if (m.find("padded KV pages do not support kernel block splitting") != std::string::npos) {
    return "a padded page the backend's kernel blocks cannot split";
  }
  if (m.find("kernel") != std::string::npos) return "no kernel block the backend supports";
  if (m.find("page") != std::string::npos) return "pages cannot be unified";
  if (m.find("block") != std::string::npos) return "block sizes refused at startup";
  return "refused at startup";
}

std::string RetentionLabel(const RetentionInterval& r) {
  switch (r.kind) {
    case RetentionInterval::Kind::kUnset:
      return "default";
    case RetentionInterval::Kind::kDense:
      return "dense";
    case RetentionInterval::Kind::kTokens:
      return std::to_string(r.tokens);
  }
  return "";
}

std::string ChoiceLabel(const TuneChoice& c) {
  std::vector<std::string> parts;
  parts.push_back(c.sliding_window_block ? absl::StrCat("swa=", *c.sliding_window_block)
                                         : c.policy);
  if (c.block_size) parts.push_back(absl::StrCat("block_size=", *c.block_size));
  if (c.prefix_match_unit)
    parts.push_back(absl::StrCat("prefix_match_unit=", *c.prefix_match_unit));
  if (c.retention_interval) {
    parts.push_back(absl::StrCat("retention=", RetentionLabel(*c.retention_interval)));
  }
  return absl::StrJoin(parts, " ");
}

EngineConfig ApplyChoice(const EngineConfig& base, const TuneChoice& c) {
  EngineConfig engine = base;
  if (c.block_size) engine.block_size = *c.block_size;
  if (c.prefix_match_unit) engine.prefix_match_unit = *c.prefix_match_unit;
  if (c.retention_interval) engine.prefix_cache_retention_interval = *c.retention_interval;
  return engine;
}

absl::StatusOr<KvPlan> ResolveChoice(const ModelSpec& model, const EngineConfig& base,
                                     const TuneChoice& c) {
  const EngineConfig engine = ApplyChoice(base, c);
  if (c.sliding_window_block) {
    const std::unique_ptr<BlockSizePolicy> fixed =
        MakeFixedSlidingWindowPolicy(ChoiceLabel(c), *c.sliding_window_block);
    PREFIXSIM_ASSIGN_OR_RETURN(KvPlan plan, ResolveKvPlan(model, engine, *fixed));
    PREFIXSIM_RETURN_IF_ERROR(CheckStartupMemory(plan));
    return plan;
  }
  return ResolvePlanForServing(model, engine, c.policy);
}

// Block sizes to try: powers of two from 16 to 4096 and the engine's own resolved block times 2,
// 3 and 4 (a mamba-aligned block such as 1536 is not a power of two).
std::vector<std::optional<int>> BlockSizeOptions(const TuneSpace& space, int resolved_primary) {
  std::vector<std::optional<int>> options = {std::nullopt};
  if (!space.block_size) return options;
  std::set<int> sizes;
  for (int b = 16; b <= 4096; b *= 2) sizes.insert(b);
  for (int k = 2; k <= 4; ++k) sizes.insert(resolved_primary * k);
  for (int b : sizes) options.push_back(b);
  return options;
}

// SWA blocks to try: for each kernel block size v the backend declares (an exact size, or
// MultipleOf(v)), v's powers-of-two multiples up to the primary block and the multiples of v that
// divide it. A manager block that is a multiple of an exact kernel size is split into kernel
// blocks (docs/semantics.md §3.2), unless its page is padded: the planner refuses those, and the
// search counts them.
std::vector<int> SlidingWindowOptions(const AttentionBackend& backend, int primary) {
  std::set<int> sizes;
  for (const KernelBlockSize& k : backend.kernel_block_sizes) {
    sizes.insert(k.value);
    for (int b = k.value; b <= primary; b *= 2) sizes.insert(b);
    for (int b = k.value; b <= primary; b += k.value) {
      if (primary % b == 0) sizes.insert(b);
    }
  }
  return {sizes.begin(), sizes.end()};
}

// prefix_match_unit values to try: the divisors of the hashed groups' gcd that are multiples of
// 16 (smaller units only help where partial hits exist: an align-mode mamba group).
std::vector<std::optional<int>> MatchUnitOptions(const TuneSpace& space, const KvPlan& plan,
                                                 const EngineConfig& engine) {
  std::vector<std::optional<int>> options = {std::nullopt};
  if (!space.prefix_match_unit || engine.mamba_cache_mode != MambaCacheMode::kAlign ||
      !HasGroup(plan, LayerKind::kMamba)) {
    return options;
  }
  int64_t g = 0;
  for (const KvGroup& group : plan.groups) {
    if (group.prefix_cacheable) g = std::gcd(g, static_cast<int64_t>(group.block_size));
  }
  for (int64_t d = 16; d < g; d += 16) {
    if (g % d == 0) options.push_back(static_cast<int>(d));
  }
  return options;
}

std::vector<std::optional<RetentionInterval>> RetentionOptions(const TuneSpace& space,
                                                               const KvPlan& plan) {
  std::vector<std::optional<RetentionInterval>> options = {std::nullopt};
  if (!space.retention_interval ||
      !(HasGroup(plan, LayerKind::kSlidingWindow) || HasGroup(plan, LayerKind::kMamba))) {
    return options;
  }
  options.push_back(RetentionInterval{RetentionInterval::Kind::kDense, 0});
  options.push_back(RetentionInterval{RetentionInterval::Kind::kTokens, 0});
  for (int64_t k : {1, 2, 4, 8}) {
    options.push_back(
        RetentionInterval{RetentionInterval::Kind::kTokens, k * plan.scheduler_block_size});
  }
  return options;
}

struct Space {
  std::vector<TuneCandidate> candidates;
  std::string first_policy;  // the first baseline's label
  std::vector<std::string> notes;
  int64_t considered = 0;
  int64_t duplicates = 0;
  std::map<std::string, int64_t> pruned;
};

// Resolves combinations into the search space: each distinct feasible plan once, refusals
// counted by reason, repeats counted as duplicates.
class SpaceBuilder {
 public:
  SpaceBuilder(const ModelSpec& model, const EngineConfig& engine, const TuneSpace& space)
      : model_(model), engine_(engine), space_(space) {}

  // The plan of `c`, whether new or already seen; nullopt when it is refused or pointless.
  std::optional<KvPlan> Consider(const TuneChoice& c, bool baseline) {
    ++out_.considered;
    absl::StatusOr<KvPlan> plan = ResolveChoice(model_, engine_, c);
    if (!plan.ok()) {
      if (!baseline) ++out_.pruned[PruneReason(plan.status())];
      return std::nullopt;
    }
    if (c.prefix_match_unit && !plan->partial_hits) {
      // H alone changes no hit: without partial hits every hit ends on S (docs/semantics.md §7).
      ++out_.pruned["prefix_match_unit without effect: no partial hits, hits stay on S"];
      return std::nullopt;
    }
    const auto [first, inserted] = seen_.try_emplace(PlanSignature(*plan), ChoiceLabel(c));
    if (!inserted) {
      ++out_.duplicates;
      if (baseline) {
        out_.notes.push_back(
            absl::StrCat("policy ", c.policy, " gives the same plan as ", first->second, " here"));
      }
      return *plan;
    }
    TuneCandidate candidate;
    candidate.choice = c;
    candidate.label = first->second;
    candidate.baseline = baseline;
    candidate.plan = *plan;
    out_.candidates.push_back(std::move(candidate));
    return *plan;
  }

  // `start`, and every match unit and retention interval on top of it.
  void Expand(const TuneChoice& start) {
    const std::optional<KvPlan> plan0 = Consider(start, false);
    if (!plan0) return;
    for (const std::optional<int>& unit : MatchUnitOptions(space_, *plan0, engine_)) {
      TuneChoice with_unit = start;
      with_unit.prefix_match_unit = unit;
      const std::optional<KvPlan> plan1 = unit ? Consider(with_unit, false) : plan0;
      if (!plan1) continue;
      for (const std::optional<RetentionInterval>& r : RetentionOptions(space_, *plan1)) {
        if (!r) continue;  // the engine's own: plan1 itself
        TuneChoice with_retention = with_unit;
        with_retention.retention_interval = r;
        Consider(with_retention, false);
      }
    }
  }

  Space& space() { return out_; }

 private:
  const ModelSpec& model_;
  const EngineConfig& engine_;
  const TuneSpace& space_;
  Space out_;
  std::map<std::string, std::string> seen_;  // plan signature -> the first label that gave it
};

// The starting points at one block size: each policy's own SWA block, then every SWA block the
// backend accepts, forced.
std::vector<TuneChoice> StartingPoints(const TuneSpace& space, const EngineConfig& engine,
                                       const std::vector<std::string>& policies,
                                       const KvPlan& first_plan, std::optional<int> block) {
  std::vector<TuneChoice> starts;
  for (const std::string& p : policies) starts.push_back(TuneChoice{p, block, {}, {}, {}});
  if (space.sliding_window_block && HasGroup(first_plan, LayerKind::kSlidingWindow)) {
    const int primary = block.value_or(first_plan.primary_block_size);
    for (int swa : SlidingWindowOptions(engine.BackendFor(LayerKind::kSlidingWindow), primary)) {
      starts.push_back(TuneChoice{policies.front(), block, swa, {}, {}});
    }
  }
  return starts;
}

// Every combination of the knobs, resolved; the feasible and distinct ones kept, the baselines
// (each starting policy with the engine as given) first, so that a plan they share with another
// combination keeps their name.
absl::StatusOr<Space> EnumerateSpace(const ModelSpec& model, const EngineConfig& engine,
                                     const TuneSpace& space) {
  const std::vector<std::string> policies =
      space.policies.empty() ? RegisteredPolicyNames() : space.policies;
  for (const std::string& p : policies) {
    if (FindPolicy(p) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("`policies`: unknown policy '", p,
                       "' (registered: ", absl::StrJoin(RegisteredPolicyNames(), ", "), ")"));
    }
  }
  SpaceBuilder builder(model, engine, space);
  builder.space().first_policy = policies.front();
  std::optional<KvPlan> first_plan;
  for (const std::string& p : policies) {
    const TuneChoice c{p, {}, {}, {}, {}};
    std::optional<KvPlan> plan = builder.Consider(c, /*baseline=*/true);
    if (!plan) {
      absl::StatusOr<KvPlan> refused = ResolveChoice(model, engine, c);
      return absl::InvalidArgumentError(
          absl::StrCat("policy ", p,
                       " with the engine as given is refused, so it cannot be tune's "
                       "baseline (name the others with `policies`): ",
                       refused.status().message()));
    }
    if (!first_plan) first_plan = std::move(plan);
  }
  for (const std::optional<int>& block : BlockSizeOptions(space, first_plan->primary_block_size)) {
    for (const TuneChoice& start : StartingPoints(space, engine, policies, *first_plan, block)) {
      builder.Expand(start);
    }
  }
  return std::move(builder.space());
}

// ---------------------------------------------------------------------------------------------
// Replays.

struct ReplayOutcome {
  int64_t requests = 0;
  int64_t hits = 0;
  int64_t queries = 0;
  double ttft_p99_ms = 0;
  bool overloaded = false;
  int replicas = 0;
  int64_t sim_time_ns = 0;
  int64_t trace_span_ns = 0;
};

nlohmann::ordered_json OutcomeToJson(const std::string& key, const ReplayOutcome& o) {
  nlohmann::ordered_json j;
  j["key"] = key;
  j["requests"] = o.requests;
  j["hits"] = o.hits;
  j["queries"] = o.queries;
  j["ttft_p99_ms"] = o.ttft_p99_ms;
  j["overloaded"] = o.overloaded;
  j["replicas"] = o.replicas;
  j["sim_time_ns"] = o.sim_time_ns;
  j["trace_span_ns"] = o.trace_span_ns;
  return j;
}

// The resume file: replays already finished, by key; appended to as replays finish.
class ReplayLog {
 public:
  absl::Status Open(const std::string& path) {
    if (path.empty()) return absl::OkStatus();
    std::ifstream in(path);
    std::string line;
    int line_number = 0;
    while (std::getline(in, line)) {
      ++line_number;
      if (line.empty()) continue;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object() || !j.contains("key") || !j["key"].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_number,
                         ": field 'key': not a tune resume record (a JSON object with "
                         "a string key); delete the file to start afresh"));
      }
      ReplayOutcome o;
      o.requests = j.value("requests", int64_t{0});
      o.hits = j.value("hits", int64_t{0});
      o.queries = j.value("queries", int64_t{0});
      o.ttft_p99_ms = j.value("ttft_p99_ms", 0.0);
      o.overloaded = j.value("overloaded", false);
      o.replicas = j.value("replicas", 0);
      o.sim_time_ns = j.value("sim_time_ns", int64_t{0});
      o.trace_span_ns = j.value("trace_span_ns", int64_t{0});
      done_[j["key"].get<std::string>()] = o;
    }
    out_.open(path, std::ios::app);
    if (!out_) return absl::NotFoundError(absl::StrCat(path, ": cannot write the resume file"));
    return absl::OkStatus();
  }
  std::optional<ReplayOutcome> Find(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = done_.find(key);
    if (it == done_.end()) return std::nullopt;
    return it->second;
  }
  void Record(const std::string& key, const ReplayOutcome& o) {
    std::lock_guard<std::mutex> lock(mu_);
    done_[key] = o;
    if (out_.is_open()) out_ << OutcomeToJson(key, o).dump() << "\n" << std::flush;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, ReplayOutcome> done_;
  std::ofstream out_;
};

struct Replayer {
  const TuneOptions& options;
  const ModelSpec& model;
  const EngineConfig& engine;
  ParsedTrace* parsed;  // null: parse the file for each replay
  const std::atomic<int>* interrupt;
  ReplayLog* log;
  std::atomic<int64_t> replays{0};
  std::atomic<int64_t> resumed{0};

  // Replays `c` on the first `requests` requests: on `replicas` engines behind the engine's
  // router, or with `size_fleet` on the smallest fleet that meets the SLO.
  absl::StatusOr<ReplayOutcome> Run(const TuneCandidate& c, int64_t requests, int replicas,
                                    bool size_fleet) {
    const std::string key = absl::StrCat(c.label, "|", PlanSignature(c.plan), "|", requests, "|",
                                         size_fleet ? "auto" : std::to_string(replicas), "|",
                                         size_fleet ? options.ttft_slo_ms : 0.0);
    if (std::optional<ReplayOutcome> done = log->Find(key)) {
      ++resumed;
      return *done;
    }
    run::ReplayConfig config = options.replay;
    config.no_miss_causes = true;  // the search reads hit rates and latencies only
    config.no_progress = true;
    config.kv_event_sink = nullptr;
    config.threads = size_fleet ? options.replay.threads : 1;
    const int64_t h = c.plan.enable_prefix_caching && !c.plan.groups.empty()
                          ? kv::KvCacheCoordinator::HashBlockSize(c.plan)
                          : 0;
    ParsedTrace* parsed_trace = parsed;
    const run::ReplayConfig& outer = options.replay;
    config.open_trace = [parsed_trace, h, requests, &outer](
                            const TraceOptions&) -> absl::StatusOr<std::unique_ptr<TraceReader>> {
      if (parsed_trace != nullptr) {
        const std::vector<PromptHashes>* hashes = h > 0 ? parsed_trace->HashesAt(h) : nullptr;
        return std::unique_ptr<TraceReader>(std::make_unique<ParsedTraceReader>(
            *parsed_trace, hashes, static_cast<size_t>(requests)));
      }
      PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> inner, OpenConfiguredTrace(outer));
      return std::unique_ptr<TraceReader>(
          std::make_unique<LimitedReader>(std::move(inner), requests));
    };
    EngineConfig candidate_engine = ApplyChoice(engine, c.choice);
    candidate_engine.fleet.auto_replicas = size_fleet;
    if (size_fleet) {
      candidate_engine.fleet.ttft_slo_ms = options.ttft_slo_ms;
    } else {
      candidate_engine.fleet.replicas = replicas;
    }
    PREFIXSIM_ASSIGN_OR_RETURN(
        const ReplayResult result,
        run::RunReplay(config, model, candidate_engine, c.plan, interrupt, {},
                       /*keep_records=*/false));
    if (result.partial) return absl::CancelledError("interrupted");
    ReplayOutcome o;
    o.requests = requests;
    o.hits = result.prefix_cache.hits;
    o.queries = result.prefix_cache.queries;
    o.ttft_p99_ms = result.ttft.p99_ms;
    o.overloaded = result.overloaded;
    o.replicas = result.fleet ? result.fleet->replicas : 1;
    o.sim_time_ns = result.sim_time_ns;
    o.trace_span_ns = result.trace_span_ns;
    ++replays;
    log->Record(key, o);
    return o;
  }
};

void ApplyOutcome(const ReplayOutcome& o, TuneCandidate* c) {
  c->replayed_requests = o.requests;
  c->hit_tokens = o.hits;
  c->query_tokens = o.queries;
  c->hit_rate = o.queries > 0 ? static_cast<double>(o.hits) / static_cast<double>(o.queries) : 0;
  c->ttft_p99_ms = o.ttft_p99_ms;
  c->overloaded = o.overloaded;
}

// Runs `fn` on every index of `items` on the search's threads; the first error in index order.
absl::Status ForEachCandidate(size_t n, int threads,
                              const std::function<absl::Status(size_t)>& fn) {
  std::vector<absl::Status> status(n);
  ParallelFor(n, threads, [&](size_t i) { status[i] = fn(i); });
  for (const absl::Status& s : status) PREFIXSIM_RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

// Better by replayed hit rate on the same requests; ties by the cheap ranking.
// Plans beyond the replayed ones that get their vLLM flags worked out (each costs a few plan
// resolutions; the thousands further down the ranking are never shown).
constexpr size_t kDescribedPlans = 200;

bool HitOrder(const TuneCandidate& a, const TuneCandidate& b) {
  if (a.replayed_requests != b.replayed_requests) return a.replayed_requests > b.replayed_requests;
  if (a.hit_tokens != b.hit_tokens) return a.hit_tokens > b.hit_tokens;
  return a.rank < b.rank;
}

// ---------------------------------------------------------------------------------------------
// How vLLM realises a plan.

void DescribeInVllm(const ModelSpec& model, const EngineConfig& engine, TuneCandidate* c) {
  const TuneChoice& choice = c->choice;
  std::vector<std::string> notes;
  if (choice.block_size)
    c->vllm_args.emplace_back("block_size", std::to_string(*choice.block_size));
  if (choice.prefix_match_unit) {
    c->vllm_args.emplace_back("prefix_match_unit", std::to_string(*choice.prefix_match_unit));
  }
  if (choice.retention_interval) {
    if (choice.retention_interval->kind == RetentionInterval::Kind::kTokens) {
      c->vllm_args.emplace_back("prefix_cache_retention_interval",
                                std::to_string(choice.retention_interval->tokens));
    } else if (choice.retention_interval->kind == RetentionInterval::Kind::kDense) {
      notes.push_back(absl::StrCat(
          "prefix_cache_retention_interval=None (dense); vLLM resolves an unset interval to ",
          c->plan.retention_interval_source.empty() ? "its default"
                                                    : c->plan.retention_interval_source));
    }
  }
  if (!HasGroup(c->plan, LayerKind::kSlidingWindow)) {
    // No SWA group: the policy decides nothing.
  } else if (!choice.sliding_window_block) {
    const BlockSizePolicy* policy = FindPolicy(choice.policy);
    notes.push_back(absl::StrCat("SWA block from policy ", choice.policy, " (",
                                 policy != nullptr ? AbslView(policy->description()) : "", ")"));
  } else {
    // A registered policy that gives the same plan names the vLLM version that does it.
    std::string same;
    for (const std::string& p : RegisteredPolicyNames()) {
      TuneChoice as_policy = choice;
      as_policy.sliding_window_block.reset();
      as_policy.policy = p;
      absl::StatusOr<KvPlan> plan = ResolveChoice(model, engine, as_policy);
      if (plan.ok() && PlanSignature(*plan) == PlanSignature(c->plan)) {
        same = p;
        break;
      }
    }
    if (!same.empty()) {
      notes.push_back(absl::StrCat("SWA block ", *choice.sliding_window_block, " is what policy ",
                                   same, " picks (", AbslView(FindPolicy(same)->description()),
                                   ")"));
    } else {
      notes.push_back(absl::StrCat(
          "no vLLM flag sets the SWA layers' block (", *choice.sliding_window_block,
          "); no registered policy picks it: replay it with the policy file tune writes"));
    }
  }
  c->vllm_note = absl::StrJoin(notes, "; ");
  auto& options = c->replay_options;
  options.emplace_back("policy", choice.sliding_window_block
                                     ? absl::StrCat("swa", *choice.sliding_window_block, ".json")
                                     : choice.policy);
  for (const auto& arg : c->vllm_args) options.push_back(arg);
  if (choice.retention_interval &&
      choice.retention_interval->kind == RetentionInterval::Kind::kDense) {
    options.emplace_back("prefix_cache_retention_interval", "dense");
  }
}

void MarkParetoFront(std::vector<TuneCandidate>* candidates, int64_t full) {
  for (TuneCandidate& a : *candidates) {
    if (a.replayed_requests != full) continue;
    a.pareto = std::none_of(candidates->begin(), candidates->end(), [&](const TuneCandidate& b) {
      if (&a == &b || b.replayed_requests != full) return false;
      const bool no_worse = b.hit_tokens >= a.hit_tokens && b.memory_waste <= a.memory_waste;
      const bool better = b.hit_tokens > a.hit_tokens || b.memory_waste < a.memory_waste;
      return no_worse && better;
    });
  }
}

}  // namespace

std::optional<TuneObjective> ParseTuneObjective(std::string_view name) {
  if (name == "hit") return TuneObjective::kHitRate;
  if (name == "replicas") return TuneObjective::kReplicas;
  return std::nullopt;
}

std::string_view TuneObjectiveName(TuneObjective objective) {
  return objective == TuneObjective::kHitRate ? "hit" : "replicas";
}

namespace {

// The cheap numbers of each plan: its bound on the trace, its padding, its pool.
void MeasureCheaply(const AnalyzeResult& analysis, std::vector<TuneCandidate>* cands) {
  std::map<int64_t, int64_t> bound_at;
  for (const AlignmentPoint& p : analysis.alignment_curve) bound_at[p.alignment] = p.hit_tokens;
  for (TuneCandidate& c : *cands) {
    c.bound_hit_tokens = bound_at[c.plan.hit_alignment];
    c.bound_hit_rate = static_cast<double>(c.bound_hit_tokens) /
                       static_cast<double>(std::max<int64_t>(1, analysis.prompt_tokens));
    c.memory_waste = ComputePlanWaste(c.plan).waste_fraction;
    c.pool_max_len_requests = c.plan.blocks_per_max_len_request > 0
                                  ? static_cast<double>(c.plan.num_blocks - 1) /
                                        static_cast<double>(c.plan.blocks_per_max_len_request)
                                  : 0;
  }
}

// The cheap ranking: fronts of the plans no other beats on both the bound and the pool (a plan
// with a finer alignment pays for it in padding, and so in pool, so neither number alone ranks
// well), the first front first; within a front by bound, then pool, then label.
void RankCheaply(std::vector<TuneCandidate>* cands) {
  std::stable_sort(cands->begin(), cands->end(),
                   [](const TuneCandidate& a, const TuneCandidate& b) {
                     if (a.bound_hit_tokens != b.bound_hit_tokens) {
                       return a.bound_hit_tokens > b.bound_hit_tokens;
                     }
                     if (a.pool_max_len_requests != b.pool_max_len_requests) {
                       return a.pool_max_len_requests > b.pool_max_len_requests;
                     }
                     return a.label < b.label;
                   });
  std::vector<int> front(cands->size(), -1);
  size_t assigned = 0;
  for (int f = 0; assigned < cands->size(); ++f) {
    // Sorted by bound, then pool: a plan is beaten iff an earlier unassigned plan of a greater
    // bound has at least its pool, or one of the same bound has more.
    double pool_of_greater_bounds = -1;
    double pool_of_this_bound = -1;
    int64_t this_bound = -1;
    std::vector<size_t> members;
    for (size_t i = 0; i < cands->size(); ++i) {
      if (front[i] >= 0) continue;
      const TuneCandidate& c = (*cands)[i];
      if (c.bound_hit_tokens != this_bound) {
        pool_of_greater_bounds = std::max(pool_of_greater_bounds, pool_of_this_bound);
        pool_of_this_bound = -1;
        this_bound = c.bound_hit_tokens;
      }
      const bool beaten = pool_of_greater_bounds >= c.pool_max_len_requests ||
                          pool_of_this_bound > c.pool_max_len_requests;
      pool_of_this_bound = std::max(pool_of_this_bound, c.pool_max_len_requests);
      if (!beaten) members.push_back(i);
    }
    for (size_t i : members) front[i] = f;
    assigned += members.size();
  }
  std::vector<size_t> order(cands->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return front[a] < front[b]; });
  std::vector<TuneCandidate> ranked;
  ranked.reserve(cands->size());
  for (size_t i : order) ranked.push_back(std::move((*cands)[i]));
  *cands = std::move(ranked);
  for (size_t i = 0; i < cands->size(); ++i) (*cands)[i].rank = static_cast<int>(i + 1);
}

// The replayed set: the best `budget` of the cheap ranking, and every baseline.
std::vector<size_t> SelectForReplay(const std::vector<TuneCandidate>& cands, int budget) {
  std::vector<size_t> live;
  int taken = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (cands[i].baseline) {
      live.push_back(i);
    } else if (taken < budget) {
      live.push_back(i);
      ++taken;
    }
  }
  return live;
}

// `live` best first by hit rate, then the baselines and the first `keep` of the others.
std::vector<size_t> KeepBest(const std::vector<TuneCandidate>& cands, std::vector<size_t> live,
                             int64_t keep) {
  std::stable_sort(live.begin(), live.end(),
                   [&](size_t a, size_t b) { return HitOrder(cands[a], cands[b]); });
  std::vector<size_t> kept;
  int64_t others = 0;
  for (size_t i : live) {
    if (cands[i].baseline || others++ < keep) kept.push_back(i);
  }
  return kept;
}

// Successive halving over growing prefixes of the trace, each round's plans on `replicas`
// engines; the last round replays all of it.
absl::Status RunHalving(const TuneOptions& options, int64_t n, int replicas, Replayer& replayer,
                        std::vector<TuneCandidate>& cands, std::vector<size_t>* live,
                        const std::function<void(const std::string&)>& say) {
  for (int round = 0; round < options.rounds; ++round) {
    int64_t requests = n;
    for (int k = round + 1; k < options.rounds; ++k) requests /= options.eta;
    requests = std::max<int64_t>(1, requests);
    say(absl::StrFormat("tune: round %d of %d, %d plans on %d requests, %d replica%s each",
                        round + 1, options.rounds, live->size(), requests, replicas,
                        replicas == 1 ? "" : "s"));
    PREFIXSIM_RETURN_IF_ERROR(ForEachCandidate(live->size(), options.replay.threads, [&](size_t i) {
      TuneCandidate& c = cands[(*live)[i]];
      PREFIXSIM_ASSIGN_OR_RETURN(const ReplayOutcome o,
                                 replayer.Run(c, requests, replicas, /*size_fleet=*/false));
      ApplyOutcome(o, &c);
      return absl::OkStatus();
    }));
    if (round + 1 == options.rounds) break;
    const int64_t others =
        std::count_if(live->begin(), live->end(), [&](size_t i) { return !cands[i].baseline; });
    *live =
        KeepBest(cands, *live,
                 std::max<int64_t>(options.finalists, (others + options.eta - 1) / options.eta));
    std::sort(live->begin(), live->end());
  }
  return absl::OkStatus();
}

// Objective replicas: the smallest fleet within the SLO for the baselines and the best
// `finalists` others, and the GPU-hours per million requests it spends.
absl::Status SizeFleets(const TuneOptions& options, const EngineConfig& engine, int64_t n,
                        Replayer& replayer, std::vector<TuneCandidate>& cands,
                        const std::vector<size_t>& live,
                        const std::function<void(const std::string&)>& say) {
  const std::vector<size_t> sized = KeepBest(cands, live, options.finalists);
  say(absl::StrFormat("tune: sizing the fleets of %d plans for p99 TTFT <= %.0f ms", sized.size(),
                      replayer.options.ttft_slo_ms));
  // One fleet at a time: each sizing spreads its replicas over the threads.
  for (size_t i : sized) {
    TuneCandidate& c = cands[i];
    absl::StatusOr<ReplayOutcome> sizing = replayer.Run(c, n, 0, /*size_fleet=*/true);
    if (absl::IsFailedPrecondition(sizing.status())) {
      // No fleet meets the SLO with this plan: a finding about the plan, not a failed search.
      c.sizing_error = std::string(sizing.status().message());
      continue;
    }
    PREFIXSIM_RETURN_IF_ERROR(sizing.status());
    c.replicas = sizing->replicas;
    const double span_h =
        static_cast<double>(std::max(sizing->sim_time_ns, sizing->trace_span_ns)) / 3.6e12;
    c.gpu_hours_per_million = static_cast<double>(sizing->replicas) * engine.tensor_parallel_size *
                              span_h / static_cast<double>(n) * 1e6;
  }
  return absl::OkStatus();
}

// The fleet the rounds replay each plan on: one engine, or with objective replicas the fleet the
// first baseline needs for the SLO, so that the plans are compared where they would serve.
absl::StatusOr<int> RoundReplicas(const TuneOptions& options, int64_t n, Replayer& replayer,
                                  const TuneCandidate& first_baseline,
                                  const std::function<void(const std::string&)>& say) {
  if (options.objective != TuneObjective::kReplicas) return 1;
  say(absl::StrFormat("tune: sizing %s's fleet for p99 TTFT <= %.0f ms", first_baseline.label,
                      replayer.options.ttft_slo_ms));
  absl::StatusOr<ReplayOutcome> sized = replayer.Run(first_baseline, n, 0, /*size_fleet=*/true);
  if (absl::IsFailedPrecondition(sized.status())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "`ttft_slo_ms`: with objective replicas the plans are compared at the SLO, and baseline ",
        first_baseline.label, " cannot meet it: ", sized.status().message()));
  }
  PREFIXSIM_RETURN_IF_ERROR(sized.status());
  return sized->replicas;
}

// The final order: sized fleets first (fewest replicas), then by hit rate on the most requests,
// then the cheap ranking; the checks of the bound; the front; the vLLM flags.
void Conclude(const ModelSpec& model, const EngineConfig& engine, int64_t n,
              std::vector<TuneCandidate> cands, TuneResult* result) {
  std::stable_sort(cands.begin(), cands.end(), [](const TuneCandidate& a, const TuneCandidate& b) {
    if ((a.replicas > 0) != (b.replicas > 0)) return a.replicas > 0;
    if (a.replicas > 0 && a.replicas != b.replicas) return a.replicas < b.replicas;
    return HitOrder(a, b);
  });
  const TuneCandidate& best = cands.front();
  for (const TuneCandidate& c : cands) {
    if (c.replayed_requests == n && c.hit_tokens > c.bound_hit_tokens) ++result->bound_exceeded;
    if (c.replayed_requests > 0 && c.overloaded) ++result->overloaded;
    if (c.replayed_requests == 0 && c.bound_hit_tokens > best.hit_tokens) {
      ++result->unreplayed_above_best;
    }
  }
  MarkParetoFront(&cands, n);
  // Described: every replayed plan and the next of the ranking (what the reports can show).
  for (size_t i = 0; i < cands.size(); ++i) {
    if (cands[i].replayed_requests > 0 || i < kDescribedPlans) {
      DescribeInVllm(model, engine, &cands[i]);
    }
  }
  result->best = 0;
  result->candidates = std::move(cands);
}

}  // namespace

absl::StatusOr<TuneResult> RunTune(const TuneOptions& options, const std::atomic<int>* interrupt,
                                   const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  if (options.budget < 1) return absl::InvalidArgumentError("`budget`: at least 1");
  if (options.rounds < 1 || options.rounds > 8) {
    return absl::InvalidArgumentError("`rounds`: between 1 and 8");
  }
  if (options.eta < 2 || options.eta > 16) {
    return absl::InvalidArgumentError("`eta`: between 2 and 16");
  }
  if (options.finalists < 1) return absl::InvalidArgumentError("`finalists`: at least 1");
  PREFIXSIM_ASSIGN_OR_RETURN(const run::ModelAndEngine loaded,
                             run::LoadModelAndEngine(options.replay.model_engine));
  if (loaded.engine.fleet.auto_replicas || loaded.engine.fleet.replicas > 1) {
    return absl::InvalidArgumentError(
        "`replicas`: tune replays one engine per plan (and sizes the fleet itself with "
        "objective replicas); leave replicas unset");
  }
  TuneResult result;
  result.objective = options.objective;
  result.ttft_slo_ms =
      options.ttft_slo_ms > 0 ? options.ttft_slo_ms : loaded.engine.fleet.ttft_slo_ms;
  PREFIXSIM_ASSIGN_OR_RETURN(Space space,
                             EnumerateSpace(loaded.model, loaded.engine, options.space));
  result.considered = space.considered;
  result.duplicates = space.duplicates;
  result.pruned = space.pruned;
  result.notes = space.notes;
  say(absl::StrFormat("tune: %d combinations, %d distinct feasible plans", space.considered,
                      space.candidates.size()));

  std::set<int64_t> alignments;
  for (const TuneCandidate& c : space.candidates) alignments.insert(c.plan.hit_alignment);
  PREFIXSIM_ASSIGN_OR_RETURN(TraceSurvey survey,
                             SurveyTrace(options.replay, {alignments.begin(), alignments.end()},
                                         options.trace_memory_bytes));
  result.trace_requests = survey.analysis.requests;
  result.trace_prompt_tokens = survey.analysis.prompt_tokens;
  result.trace_in_memory = survey.parsed != nullptr;
  if (result.trace_requests == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the trace ", options.replay.trace, " has no requests: nothing to tune for"));
  }
  std::vector<TuneCandidate>& cands = space.candidates;
  MeasureCheaply(survey.analysis, &cands);
  RankCheaply(&cands);
  std::vector<size_t> live = SelectForReplay(cands, options.budget);

  ReplayLog log;
  PREFIXSIM_RETURN_IF_ERROR(log.Open(options.state_path));
  TuneOptions replay_options = options;
  replay_options.ttft_slo_ms = result.ttft_slo_ms;
  Replayer replayer{
      replay_options, loaded.model, loaded.engine, survey.parsed.get(), interrupt, &log, {}, {}};
  const int64_t n = result.trace_requests;
  const auto first_baseline = std::find_if(cands.begin(), cands.end(), [&](const TuneCandidate& c) {
    return c.baseline && c.label == space.first_policy;
  });
  PREFIXSIM_ASSIGN_OR_RETURN(result.round_replicas,
                             RoundReplicas(options, n, replayer, *first_baseline, say));
  PREFIXSIM_RETURN_IF_ERROR(
      RunHalving(options, n, result.round_replicas, replayer, cands, &live, say));
  if (options.objective == TuneObjective::kReplicas) {
    PREFIXSIM_RETURN_IF_ERROR(SizeFleets(options, loaded.engine, n, replayer, cands, live, say));
  }
  result.replays = replayer.replays.load();
  result.resumed_replays = replayer.resumed.load();
  Conclude(loaded.model, loaded.engine, n, std::move(cands), &result);
  return result;
}

// ---------------------------------------------------------------------------------------------
// Outputs.

namespace {

// "mla 1536 x5, mamba 1536 x14, sliding_window(drafter) 512": runs of equal groups counted.
std::string GroupBlocks(const KvPlan& plan) {
  std::vector<std::string> parts;
  std::string last;
  int run = 0;
  auto flush = [&] {
    if (run > 0) parts.push_back(run > 1 ? absl::StrCat(last, " x", run) : last);
  };
  for (const KvGroup& g : plan.groups) {
    std::string part = absl::StrCat(AbslView(LayerKindName(g.kind)), g.drafter() ? "(drafter)" : "",
                                    " ", g.block_size);
    if (part == last) {
      ++run;
      continue;
    }
    flush();
    last = std::move(part);
    run = 1;
  }
  flush();
  return absl::StrJoin(parts, ", ");
}

std::string RetentionText(const KvPlan& plan) {
  return plan.retention_interval ? std::to_string(*plan.retention_interval) : "dense";
}

// Rows shown: the first `top`, and every baseline.
std::vector<size_t> ShownRows(const TuneResult& result, int top) {
  std::vector<size_t> rows;
  for (size_t i = 0; i < result.candidates.size(); ++i) {
    if (static_cast<int>(i) < top || result.candidates[i].baseline) rows.push_back(i);
  }
  return rows;
}

}  // namespace

namespace {

// The search's counts, what it pruned and why, and its warnings.
std::string SearchSummaryText(const TuneResult& result) {
  std::string s;
  int64_t pruned = 0;
  for (const auto& [reason, count] : result.pruned) pruned += count;
  absl::StrAppendFormat(&s,
                        "tune: %d combinations of the knobs, %d pruned (why below), "
                        "%d duplicates, %d distinct plans; %d replays (%d resumed) on a trace of "
                        "%d requests%s\n",
                        result.considered, pruned, result.duplicates, result.candidates.size(),
                        result.replays + result.resumed_replays, result.resumed_replays,
                        result.trace_requests,
                        result.trace_in_memory ? " (parsed once, held in memory)" : "");
  for (const auto& [reason, count] : result.pruned) {
    absl::StrAppendFormat(&s, "  pruned: %-66s %d\n", reason, count);
  }
  absl::StrAppendFormat(&s,
                        "  plans never replayed whose bound exceeds the recommended plan's hit "
                        "(only these could beat it): %d%s\n",
                        result.unreplayed_above_best,
                        result.unreplayed_above_best > 0 ? " (raise `budget` to replay them)" : "");
  for (const std::string& note : result.notes) absl::StrAppend(&s, "  ", note, "\n");
  if (result.round_replicas > 1) {
    absl::StrAppendFormat(&s,
                          "  the halving rounds replayed each plan on %d replicas, the fleet the "
                          "first baseline needs for the SLO; hit%% is that fleet's\n",
                          result.round_replicas);
  }
  if (result.bound_exceeded > 0) {
    absl::StrAppendFormat(&s,
                          "  WARNING: %d replays hit more than the bound (later prompts repeat "
                          "earlier outputs); the cheap ranking may have missed plans\n",
                          result.bound_exceeded);
  }
  if (result.overloaded > 0) {
    absl::StrAppendFormat(
        &s,
        "  WARNING: %d replayed plans ran on an engine that fell behind the trace: their hit "
        "rates reflect the queue as much as the plan. Tune with `objective=replicas`, slower "
        "arrivals (`time_scale`) or more memory (`kv_cache_bytes`)\n",
        result.overloaded);
  }
  return s;
}

// One row per shown plan.
std::string PlanTableText(const TuneResult& result, int top) {
  std::string s;
  const bool sized = result.objective == TuneObjective::kReplicas;
  absl::StrAppendFormat(&s, "\n%4s %5s  %-44s %6s %6s %6s %8s %7s %8s %9s", "#", "cheap", "plan",
                        "S", "H", "A", "waste%", "bound%", "hit%", "requests");
  if (sized) absl::StrAppendFormat(&s, " %8s %8s", "replicas", "GPU-h/M");
  s += "  groups (block tokens), retention\n";
  for (size_t i : ShownRows(result, top)) {
    const TuneCandidate& c = result.candidates[i];
    std::string label = c.label;
    if (c.baseline) label += " [baseline]";
    if (c.pareto) label += " *";
    if (label.size() > 44) {
      label.resize(41);
      label.append("...");
    }
    absl::StrAppendFormat(&s, "%4d %5d  %-44s %6d %6d %6d %8.2f %7.2f ", i + 1, c.rank, label,
                          c.plan.scheduler_block_size, c.plan.hash_block_size, c.plan.hit_alignment,
                          100 * c.memory_waste, 100 * c.bound_hit_rate);
    if (c.replayed_requests > 0) {
      absl::StrAppendFormat(&s, "%8.2f %9d", 100 * c.hit_rate, c.replayed_requests);
    } else {
      absl::StrAppendFormat(&s, "%8s %9s", "-", "-");
    }
    if (sized) {
      if (c.replicas > 0) {
        absl::StrAppendFormat(&s, " %8d %8.1f", c.replicas, c.gpu_hours_per_million);
      } else {
        absl::StrAppendFormat(&s, " %8s %8s", "-", "-");
      }
    }
    absl::StrAppend(&s, "  ", GroupBlocks(c.plan), "; ", RetentionText(c.plan), "\n");
  }
  for (size_t i : ShownRows(result, top)) {
    const TuneCandidate& c = result.candidates[i];
    if (!c.sizing_error.empty()) absl::StrAppend(&s, "  ", c.label, ": ", c.sizing_error, "\n");
  }
  s +=
      "(cheap: position in the cheap ranking; bound%: the trace's hit at A with an infinite cache, "
      "above hit% unless later prompts repeat earlier outputs; * on the front of replayed hit "
      "rate vs memory waste)\n";
  return s;
}

// The recommendation against each baseline.
std::string RecommendationText(const TuneResult& result) {
  std::string s;
  const bool sized = result.objective == TuneObjective::kReplicas;
  if (!result.candidates.empty()) {
    const TuneCandidate& best = result.candidates[result.best];
    absl::StrAppendFormat(&s, "\nrecommended: %s\n", best.label);
    if (!best.vllm_note.empty()) absl::StrAppend(&s, "  note: ", best.vllm_note, "\n");
    for (const TuneCandidate& c : result.candidates) {
      if (!c.baseline || c.replayed_requests == 0 || &c == &best) continue;
      if (sized && c.replicas > 0 && best.replicas > 0) {
        absl::StrAppendFormat(
            &s, "  vs %s: %s at p99 TTFT <= %.0f ms (hit %.2f%% vs %.2f%%)\n", c.label,
            best.replicas == c.replicas
                ? absl::StrFormat("the same %d replicas", c.replicas)
                : absl::StrFormat("%d replicas instead of %d", best.replicas, c.replicas),
            result.ttft_slo_ms, 100 * best.hit_rate, 100 * c.hit_rate);
      } else {
        absl::StrAppendFormat(&s, "  vs %s: hit rate %.2f%% vs %.2f%% (%+.2f pp)\n", c.label,
                              100 * best.hit_rate, 100 * c.hit_rate,
                              100 * (best.hit_rate - c.hit_rate));
      }
    }
  }
  return s;
}

}  // namespace

std::string TuneResultText(const TuneResult& result, int top) {
  return SearchSummaryText(result) + PlanTableText(result, top) + RecommendationText(result);
}

nlohmann::ordered_json TuneResultJson(const TuneResult& result, int top) {
  nlohmann::ordered_json j;
  j["objective"] = std::string(TuneObjectiveName(result.objective));
  if (result.objective == TuneObjective::kReplicas) j["ttft_slo_ms"] = result.ttft_slo_ms;
  j["trace_requests"] = result.trace_requests;
  j["round_replicas"] = result.round_replicas;
  j["trace_prompt_tokens"] = result.trace_prompt_tokens;
  j["trace_in_memory"] = result.trace_in_memory;
  j["considered"] = result.considered;
  j["duplicates"] = result.duplicates;
  nlohmann::ordered_json pruned = nlohmann::ordered_json::object();
  for (const auto& [reason, count] : result.pruned) pruned[reason] = count;
  j["pruned"] = pruned;
  j["notes"] = result.notes;
  j["distinct_plans"] = result.candidates.size();
  j["replays"] = result.replays + result.resumed_replays;
  j["resumed_replays"] = result.resumed_replays;
  j["bound_exceeded"] = result.bound_exceeded;
  j["unreplayed_above_best"] = result.unreplayed_above_best;
  j["overloaded"] = result.overloaded;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (size_t i : ShownRows(result, top)) {
    const TuneCandidate& c = result.candidates[i];
    nlohmann::ordered_json r;
    r["position"] = i + 1;
    r["label"] = c.label;
    r["baseline"] = c.baseline;
    r["policy"] = c.choice.sliding_window_block ? "" : c.choice.policy;
    if (c.choice.sliding_window_block) r["sliding_window_block"] = *c.choice.sliding_window_block;
    nlohmann::ordered_json groups = nlohmann::ordered_json::array();
    for (const KvGroup& g : c.plan.groups) {
      groups.push_back({{"kind", std::string(LayerKindName(g.kind))},
                        {"drafter", g.drafter()},
                        {"block_size", g.block_size},
                        {"page_bytes", g.page_bytes},
                        {"padding_bytes", g.padding_bytes}});
    }
    r["groups"] = groups;
    r["scheduler_block_size"] = c.plan.scheduler_block_size;
    r["hash_block_size"] = c.plan.hash_block_size;
    r["hit_alignment"] = c.plan.hit_alignment;
    if (c.plan.retention_interval) {
      r["retention_interval"] = *c.plan.retention_interval;
    } else {
      r["retention_interval"] = nullptr;
    }
    r["num_blocks"] = c.plan.num_blocks;
    r["memory_waste"] = c.memory_waste;
    r["cheap_rank"] = c.rank;
    r["bound_hit_tokens"] = c.bound_hit_tokens;
    r["bound_hit_rate"] = c.bound_hit_rate;
    r["replayed_requests"] = c.replayed_requests;
    r["hit_rate"] = c.hit_rate;
    r["hit_tokens"] = c.hit_tokens;
    r["ttft_p99_ms"] = c.ttft_p99_ms;
    r["overloaded"] = c.overloaded;
    if (c.replicas > 0) {
      r["replicas"] = c.replicas;
      r["gpu_hours_per_million_requests"] = c.gpu_hours_per_million;
    }
    if (!c.sizing_error.empty()) r["sizing_error"] = c.sizing_error;
    r["pareto"] = c.pareto;
    nlohmann::ordered_json vllm = nlohmann::ordered_json::object();
    for (const auto& [field, value] : c.vllm_args) vllm[field] = value;
    r["vllm_engine_args"] = vllm;
    r["vllm_note"] = c.vllm_note;
    nlohmann::ordered_json replay = nlohmann::ordered_json::object();
    for (const auto& [field, value] : c.replay_options) replay[field] = value;
    r["replay_options"] = replay;
    rows.push_back(r);
  }
  j["candidates"] = rows;
  if (!result.candidates.empty()) j["recommended"] = result.candidates[result.best].label;
  return j;
}

absl::StatusOr<std::string> TunedEngineJson(const TuneOptions& options, const TuneCandidate& c) {
  PREFIXSIM_ASSIGN_OR_RETURN(const std::string path,
                             ResolvePresetPath(options.replay.model_engine.engine, "engines"));
  PREFIXSIM_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  nlohmann::ordered_json engine = nlohmann::ordered_json::parse(text, nullptr, false);
  if (engine.is_discarded() || !engine.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  engine["description"] =
      absl::StrCat("prefixsim tune's plan '", c.label, "' on top of ", path,
                   "; command-line overrides given to tune are not part of this file");
  if (c.choice.block_size) engine["block_size"] = *c.choice.block_size;
  if (c.choice.prefix_match_unit) engine["prefix_match_unit"] = *c.choice.prefix_match_unit;
  if (c.choice.retention_interval) {
    const RetentionInterval& r = *c.choice.retention_interval;
    if (r.kind == RetentionInterval::Kind::kTokens) {
      engine["prefix_cache_retention_interval"] = r.tokens;
    } else if (r.kind == RetentionInterval::Kind::kDense) {
      engine["prefix_cache_retention_interval"] = nullptr;
    }
  }
  return engine.dump(2) + "\n";
}

std::string TunedPolicyJson(const TuneCandidate& c) {
  if (!c.choice.sliding_window_block) return "";
  nlohmann::ordered_json j;
  j["name"] = absl::StrCat("swa", *c.choice.sliding_window_block);
  j["sliding_window_block_size"] = *c.choice.sliding_window_block;
  return j.dump(2) + "\n";
}

nlohmann::ordered_json TuneScenarioJson(const TuneOptions& options, const TuneResult& result,
                                        int top, const std::string& policy_dir) {
  const run::ReplayConfig& replay = options.replay;
  const run::EngineOverrides& o = replay.model_engine.overrides;
  nlohmann::ordered_json base;
  // A config given as a path is written absolute (the scenario resolves relative paths against
  // its own directory); a preset name stays a name.
  auto config = [](const std::string& v) {
    return std::filesystem::exists(v) ? std::filesystem::absolute(v).lexically_normal().string()
                                      : v;
  };
  base["model"] = config(replay.model_engine.model);
  base["engine"] = config(replay.model_engine.engine);
  base["trace"] = std::filesystem::absolute(replay.trace).lexically_normal().string();
  base["seed"] = replay.seed;
  if (replay.trace_options.time_scale != 1.0) base["time_scale"] = replay.trace_options.time_scale;
  if (o.kv_cache_bytes) base["kv_cache_bytes"] = *o.kv_cache_bytes;
  if (o.num_gpu_blocks) base["num_gpu_blocks"] = *o.num_gpu_blocks;
  if (o.max_model_len) base["max_model_len"] = *o.max_model_len;
  if (o.router) base["router"] = *o.router;
  if (result.round_replicas > 1) base["replicas"] = result.round_replicas;
  nlohmann::ordered_json grids = nlohmann::ordered_json::array();
  for (size_t i : ShownRows(result, top)) {
    const TuneChoice& c = result.candidates[i].choice;
    nlohmann::ordered_json point;
    point["policy"] = c.sliding_window_block
                          ? (std::filesystem::path(policy_dir) /
                             absl::StrCat("swa", *c.sliding_window_block, ".json"))
                                .string()
                          : c.policy;
    if (c.block_size) point["block_size"] = *c.block_size;
    if (c.prefix_match_unit) point["prefix_match_unit"] = *c.prefix_match_unit;
    if (c.retention_interval && c.retention_interval->kind == RetentionInterval::Kind::kTokens) {
      point["prefix_cache_retention_interval"] = c.retention_interval->tokens;
    } else if (c.retention_interval &&
               c.retention_interval->kind == RetentionInterval::Kind::kDense) {
      point["prefix_cache_retention_interval"] = "dense";
    }
    grids.push_back({{"base", point}});
  }
  nlohmann::ordered_json j;
  j["name"] = "tune";
  j["description"] = "the plans prefixsim tune ranked, one replay each (docs/tune.md)";
  j["base"] = base;
  j["grids"] = grids;
  return j;
}

EngineConfig TunedEngine(const EngineConfig& base, const TuneCandidate& c) {
  return ApplyChoice(base, c.choice);
}

TuneFigures TuneFiguresOf(const TuneResult& result, size_t rows) {
  TuneFigures t;
  t.objective = std::string(TuneObjectiveName(result.objective));
  t.ttft_slo_ms = result.ttft_slo_ms;
  t.considered = result.considered;
  t.duplicates = result.duplicates;
  t.distinct = static_cast<int64_t>(result.candidates.size());
  t.replays = result.replays + result.resumed_replays;
  t.trace_requests = result.trace_requests;
  t.unreplayed_above_best = result.unreplayed_above_best;
  for (const auto& [reason, count] : result.pruned) t.pruned.emplace_back(reason, count);
  for (size_t i = 0; i < result.candidates.size(); ++i) {
    const TuneCandidate& c = result.candidates[i];
    // The front's plans all reach the chart, wherever they rank.
    if (i >= rows && !c.baseline && !c.pareto) continue;
    TuneFigures::Plan p;
    p.label = c.label;
    p.baseline = c.baseline;
    p.pareto = c.pareto;
    p.recommended = i == result.best;
    p.groups = GroupBlocks(c.plan);
    p.scheduler_block_size = c.plan.scheduler_block_size;
    p.hash_block_size = c.plan.hash_block_size;
    p.hit_alignment = c.plan.hit_alignment;
    p.memory_waste = c.memory_waste;
    p.bound_hit_rate = c.bound_hit_rate;
    p.hit_rate = c.hit_rate;
    p.replayed_requests = c.replayed_requests;
    p.replicas = c.replicas;
    p.gpu_hours_per_million = c.gpu_hours_per_million;
    std::vector<std::string> vllm;
    for (const auto& [field, value] : c.vllm_args) vllm.push_back(absl::StrCat(field, "=", value));
    if (!c.vllm_note.empty()) vllm.push_back(c.vllm_note);
    p.vllm = absl::StrJoin(vllm, "; ");
    t.plans.push_back(std::move(p));
  }
  return t;
}

}  // namespace prefixsim::grid
