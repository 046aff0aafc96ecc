// Engine-independent trace analysis (`prefixsim analyze`, docs/design.md §4.1): how much prefix
// reuse a trace holds, and how much of it a hit alignment or a cache size can ever capture.
//
// Model. The prompt of every request is cut into analysis blocks of `block_tokens` tokens (the
// last block holds the remainder and may be partial). A block's identity is a chained 64-bit hash
// of (parent block identity, block content), where the content is its segments: (content_id,
// offset, length) runs for virtual content and the token ids for literal content. The chain
// starts from the request's namespace_key, so requests of different namespaces never share.
// Identical content at the same prefix position therefore has the same identity, and the unique
// blocks form a forest: each node a block, each edge "followed by" (Boost.Graph adjacency_list).
//
// The trace is streamed once, in trace order, with no concurrency: a request sees the prompts
// of all earlier requests (an infinite cache), never its own.
#ifndef PREFIXSIM_ANALYZE_H_
#define PREFIXSIM_ANALYZE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "prefixsim/request.h"
#include "prefixsim/trace.h"

namespace prefixsim {

// Powers of two from 16 to 16,384: the default hit alignments of the alignment curve.
std::vector<int64_t> DefaultAnalyzeAlignments();

struct AnalyzeOptions {
  // Tokens per analysis block. 0 = auto, decided on the first request: 512 when its prompt has
  // virtual content (hash-id traces such as Mooncake, whose native block is 512 tokens), 16 when
  // it is all literal tokens (token-level traces: 16 is vLLM's default and smallest usual block
  // size, fine enough for the block statistics; the alignment curve is token-exact anyway).
  // The CLI passes the trace format's native block size instead of 0 (mooncake 512, bailian 16).
  int64_t block_tokens = 0;
  // Hit alignments (tokens, > 0) of the alignment curve; sorted and de-duplicated on output.
  std::vector<int64_t> alignments = DefaultAnalyzeAlignments();
  // Cache capacities (analysis blocks, > 0) of the capacity curve. Empty = every power of two
  // below the number of unique full blocks, plus that number itself (where both LRU and the
  // optimum reach the infinite-cache ceiling).
  std::vector<int64_t> capacities;
  // Skip the capacity curve (it keeps one 4-byte block id per full prompt block in memory).
  bool capacity_curve = true;
};

// Branching statistics of the prefix-sharing forest.
struct ForestStats {
  int64_t nodes = 0;           // == unique blocks
  int64_t edges = 0;           // parent -> child ("followed by")
  int64_t roots = 0;           // first blocks of prompts == number of trees
  int64_t leaves = 0;          // out-degree 0
  int64_t internal_nodes = 0;  // out-degree >= 1
  int64_t branch_nodes = 0;    // out-degree >= 2: where prompts that share a prefix diverge
  int64_t max_out_degree = 0;
  double mean_internal_out_degree = 0;  // edges / internal_nodes
  int64_t max_depth = 0;                // in blocks; a root has depth 1
  // Out-degree histogram of internal nodes: bucket i holds degrees [2^i, 2^(i+1)).
  struct DegreeBucket {
    int64_t min_degree = 0;
    int64_t max_degree = 0;  // inclusive
    int64_t nodes = 0;
  };
  std::vector<DegreeBucket> out_degree_histogram;
};

// Distribution over requests of the shared-prefix length: the longest prefix of the prompt, in
// tokens, already present in earlier prompts (token-exact, before the L-1 cap and alignment).
struct SharedPrefixStats {
  int64_t requests_with_shared_prefix = 0;  // length > 0
  int64_t shared_tokens = 0;                // sum of lengths
  double mean_tokens = 0;
  int64_t p50_tokens = 0;
  int64_t p90_tokens = 0;
  int64_t p99_tokens = 0;
  int64_t max_tokens = 0;
  // Bucket 0 holds length 0; bucket i >= 1 holds lengths [2^(i-1), 2^i).
  struct Bucket {
    int64_t min_tokens = 0;
    int64_t max_tokens = 0;  // inclusive
    int64_t requests = 0;
  };
  std::vector<Bucket> histogram;
};

struct AlignmentPoint {
  int64_t alignment = 0;
  int64_t hit_tokens = 0;  // sum over requests of floor(min(shared, L-1) / A) * A
  double hit_rate = 0;     // hit_tokens / prompt_tokens
};

// One prompt-length bin of the block-size cliff: the requests whose prompt has between
// min_tokens and max_tokens tokens (bin 0 holds empty prompts; bin k >= 1 holds
// [2^(k-1), 2^k - 1]) and their upper-bound hit at one alignment, as in the alignment curve.
struct PromptLengthBin {
  int64_t min_tokens = 0;
  int64_t max_tokens = 0;  // inclusive
  int64_t requests = 0;
  int64_t prompt_tokens = 0;
  int64_t hit_tokens = 0;
  double hit_fraction = 0;  // hit_tokens / prompt_tokens (token-weighted); 0 for an empty bin
};

// The block-size cliff at one hit alignment A. A hit is at most floor((L-1) / A) * A tokens (the
// last prompt token is always recomputed: docs/semantics.md §9.1, §9.3), so a prompt of
// L < A + 1 tokens can never hit, whatever it shares with earlier prompts.
struct CliffPoint {
  int64_t alignment = 0;
  int64_t never_hit_short_requests = 0;       // prompts of at most A tokens
  int64_t never_hit_short_prompt_tokens = 0;  // their prompt tokens
  double never_hit_short_share = 0;           // never_hit_short_requests / requests
  double never_hit_short_token_share = 0;     // never_hit_short_prompt_tokens / prompt_tokens
  // Every bin from the shortest prompt's to the longest prompt's, empty bins included: the same
  // edges at every alignment. Their requests sum to AnalyzeResult::requests.
  std::vector<PromptLengthBin> bins;
};

struct CapacityPoint {
  int64_t capacity_blocks = 0;
  int64_t lru_hit_tokens = 0;
  int64_t optimal_hit_tokens = 0;
  double lru_hit_rate = 0;
  double optimal_hit_rate = 0;
};

struct AnalyzeResult {
  int64_t block_tokens = 0;  // the analysis granularity used
  int64_t requests = 0;
  int64_t prompt_tokens = 0;
  // All analysis blocks of all prompts, partial last blocks included (ceil(L / block_tokens)
  // per request), and how many of them were already seen in an earlier prompt. For a Mooncake
  // trace at 512 tokens these are exactly the hash-id blocks.
  int64_t blocks = 0;
  int64_t reused_blocks = 0;
  int64_t unique_blocks = 0;         // == forest.nodes
  int64_t unique_full_blocks = 0;    // those of block_tokens tokens (what the capacity cache holds)
  double reused_block_fraction = 0;  // reused_blocks / blocks
  // The token-exact ceiling: sum of min(shared, L-1), i.e. alignment 1, over prompt_tokens.
  int64_t max_hit_tokens = 0;
  double max_hit_rate = 0;
  ForestStats forest;
  SharedPrefixStats shared_prefix;
  std::vector<AlignmentPoint> alignment_curve;  // ascending alignment
  std::vector<CliffPoint> cliff;                // one per alignment_curve point, in its order
  std::vector<CapacityPoint> capacity_curve;    // ascending capacity
};

// Yields the next request into *out; false at the end of the trace.
using RequestSource = std::function<absl::StatusOr<bool>(Request* out)>;

// Streams the requests from `next` once. Errors from the source are returned unchanged; bad
// options (non-positive block size, alignment or capacity) are InvalidArgument, and so is a
// request whose prompt segments do not cover prompt_tokens or point outside literal_tokens.
absl::StatusOr<AnalyzeResult> AnalyzeRequestStream(const RequestSource& next,
                                                   const AnalyzeOptions& options = {});
absl::StatusOr<AnalyzeResult> AnalyzeRequests(absl::Span<const Request> requests,
                                              const AnalyzeOptions& options = {});
// Opens `path` with OpenTrace and analyzes it. options.block_tokens == 0 here means the native
// block size of the detected format (mooncake: trace_block_tokens or 512; bailian: 16), else the
// auto rule above.
absl::StatusOr<AnalyzeResult> AnalyzeTraceFile(const std::string& path,
                                               const TraceOptions& trace_options,
                                               const AnalyzeOptions& options = {});

// The JSON report: requests, prompt_tokens, unique_blocks, reused_block_fraction,
// alignment_curve [{alignment, hit_rate}], cliff [{alignment, never_hit_short_requests, ...,
// bins [{min_tokens, max_tokens, requests, prompt_tokens, hit_tokens, hit_fraction}]}],
// capacity_curve [{capacity_blocks, lru_hit_rate, optimal_hit_rate}], plus the other fields of
// AnalyzeResult. Keys keep a fixed order; indented
// by two spaces, with no trailing newline.
std::string AnalyzeResultToJson(const AnalyzeResult& result);
// A readable multi-line summary for the terminal.
std::string FormatAnalyzeResult(const AnalyzeResult& result);

}  // namespace prefixsim

#endif  // PREFIXSIM_ANALYZE_H_
