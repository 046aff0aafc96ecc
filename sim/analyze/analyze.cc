// The single streaming pass of `prefixsim analyze`: builds the prefix-sharing forest, the
// shared-prefix length of every request, the hits of the alignment curve and of the block-size
// cliff per prompt length, and the block sequence of the capacity curve.
#include "prefixsim/analyze.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "boost/graph/adjacency_list.hpp"
#include "sim/analyze/cache_sim.h"
#include "sim/util/log2_bins.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

using analyze_internal::BlockSequence;

constexpr uint32_t kNoNode = std::numeric_limits<uint32_t>::max();
constexpr int64_t kDefaultVirtualBlockTokens = 512;
constexpr int64_t kDefaultLiteralBlockTokens = 16;

// splitmix64 finalizer.
uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
uint64_t Combine(uint64_t h, uint64_t x) { return Mix64(h ^ Mix64(x + 0x632BE59BD9B4E019ull)); }

constexpr uint64_t kVirtualTag = 1;
constexpr uint64_t kLiteralTag = 2ull << 32;

// A run of block content: virtual (content_id, offset, length), or literal `length` tokens at
// `tokens`.
struct Piece {
  uint64_t content_id = ContentSegment::kLiteralContent;
  uint32_t offset = 0;
  uint32_t length = 0;
  const uint32_t* tokens = nullptr;  // literal only
  bool literal() const { return content_id == ContentSegment::kLiteralContent; }
};

// Key of the first token of a block, for finding the siblings a partial match can come from.
uint64_t FirstTokenKey(const Piece& p) {
  return p.literal() ? kLiteralTag | p.tokens[0] : Combine(p.content_id, p.offset);
}

// Identity of a block given its parent's: a function of the token sequence, whatever the split
// into pieces (literal tokens are hashed one by one; virtual pieces are kept merged).
uint64_t BlockIdentity(uint64_t parent, const std::vector<Piece>& pieces) {
  uint64_t h = parent;
  for (const Piece& p : pieces) {
    if (p.literal()) {
      for (uint32_t i = 0; i < p.length; ++i) h = Combine(h, kLiteralTag | p.tokens[i]);
    } else {
      h = Combine(h, kVirtualTag);
      h = Combine(h, p.content_id);
      h = Combine(h, (uint64_t{p.offset} << 32) | p.length);
    }
  }
  return h;
}

// Longest common prefix, in tokens, of two blocks' contents.
int64_t CommonPrefix(const std::vector<Piece>& a, const std::vector<Piece>& b) {
  size_t ia = 0, ib = 0;
  uint32_t pa = 0, pb = 0;  // position inside a[ia], b[ib]
  int64_t total = 0;
  while (ia < a.size() && ib < b.size()) {
    const Piece& x = a[ia];
    const Piece& y = b[ib];
    const uint32_t step = std::min(x.length - pa, y.length - pb);
    if (x.literal() != y.literal()) break;
    if (x.literal()) {
      uint32_t i = 0;
      while (i < step && x.tokens[pa + i] == y.tokens[pb + i]) ++i;
      total += i;
      if (i < step) break;
    } else {
      if (x.content_id != y.content_id || x.offset + pa != y.offset + pb) break;
      total += step;
    }
    pa += step;
    pb += step;
    if (pa == x.length) {
      ++ia;
      pa = 0;
    }
    if (pb == y.length) {
      ++ib;
      pb = 0;
    }
  }
  return total;
}

// Cuts a request's prompt into blocks of `block_tokens` tokens.
class BlockCutter {
 public:
  BlockCutter(const Request& request, int64_t block_tokens)
      : request_(request), block_tokens_(block_tokens) {}

  // Fills *pieces with the next block (virtual pieces merged); false when the prompt is done.
  bool Next(std::vector<Piece>* pieces) {
    pieces->clear();
    int64_t want = block_tokens_;
    while (want > 0 && seg_ < request_.prompt.size()) {
      const ContentSegment& s = request_.prompt[seg_];
      const uint32_t take = static_cast<uint32_t>(std::min<int64_t>(want, s.length - pos_));
      if (take > 0) {
        Piece p;
        p.content_id = s.content_id;
        p.offset = s.offset + pos_;
        p.length = take;
        if (p.literal()) p.tokens = request_.literal_tokens.data() + p.offset;
        Piece* last = pieces->empty() ? nullptr : &pieces->back();
        if (last != nullptr && !p.literal() && last->content_id == p.content_id &&
            last->offset + last->length == p.offset) {
          last->length += take;
        } else {
          pieces->push_back(p);
        }
        want -= take;
        pos_ += take;
      }
      if (pos_ == s.length) {
        ++seg_;
        pos_ = 0;
      }
    }
    return !pieces->empty();
  }

 private:
  const Request& request_;
  int64_t block_tokens_;
  size_t seg_ = 0;
  uint32_t pos_ = 0;
};

absl::Status ValidateRequest(const Request& r, uint64_t index) {
  int64_t total = 0;
  for (size_t i = 0; i < r.prompt.size(); ++i) {
    const ContentSegment& s = r.prompt[i];
    if (s.content_id == ContentSegment::kLiteralContent &&
        uint64_t{s.offset} + s.length > r.literal_tokens.size()) {
      return absl::InvalidArgumentError(absl::StrCat("request ", index, " (id ", r.id,
                                                     "): prompt segment ", i,
                                                     " points outside literal_tokens"));
    }
    total += s.length;
  }
  if (total != r.prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("request ", index, " (id ", r.id,
                                                   "): prompt segments cover ", total,
                                                   " tokens, prompt_tokens is ", r.prompt_tokens));
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const AnalyzeOptions& o) {
  if (o.block_tokens < 0 || o.block_tokens > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_tokens must be in [1, 2^30] (0 = auto), got ", o.block_tokens));
  }
  for (int64_t a : o.alignments) {
    if (a <= 0) return absl::InvalidArgumentError(absl::StrCat("alignment must be > 0, got ", a));
  }
  for (int64_t c : o.capacities) {
    if (c <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("capacity must be > 0 blocks, got ", c));
    }
  }
  return absl::OkStatus();
}

// Everything the single pass keeps.
class Analyzer {
 public:
  explicit Analyzer(const AnalyzeOptions& options) : options_(options) {
    alignments_ = options.alignments;
    std::sort(alignments_.begin(), alignments_.end());
    alignments_.erase(std::unique(alignments_.begin(), alignments_.end()), alignments_.end());
    alignment_hits_.assign(alignments_.size(), 0);
    cliff_.assign(alignments_.size(), Cliff{});
    block_tokens_ = options.block_tokens;
  }

  void Add(const Request& request) {
    const int64_t L = request.prompt_tokens;
    ++result_.requests;
    result_.prompt_tokens += L;
    if (block_tokens_ == 0 && L > 0) {
      bool has_virtual = false;
      for (const ContentSegment& s : request.prompt) {
        has_virtual |= s.content_id != ContentSegment::kLiteralContent && s.length > 0;
      }
      block_tokens_ = has_virtual ? kDefaultVirtualBlockTokens : kDefaultLiteralBlockTokens;
    }

    uint64_t parent = Mix64(request.namespace_key ^ 0x5851F42D4C957F2Dull);
    uint32_t parent_node = kNoNode;
    bool matching = true;
    int64_t shared = 0;
    full_blocks_.clear();
    BlockCutter cutter(request, block_tokens_ == 0 ? 1 : block_tokens_);
    while (cutter.Next(&pieces_)) {
      int64_t length = 0;
      for (const Piece& p : pieces_) length += p.length;
      const uint64_t id = BlockIdentity(parent, pieces_);
      ++result_.blocks;
      uint32_t node;
      auto it = node_of_.find(id);
      if (it != node_of_.end()) {
        node = it->second;
        ++result_.reused_blocks;
        if (matching) shared += length;
      } else {
        if (matching) {
          shared += BestPartialMatch(parent);
          matching = false;
        }
        node = NewNode(id, parent, parent_node, length);
      }
      if (length == block_tokens_) full_blocks_.push_back(node);
      parent = id;
      parent_node = node;
    }

    const int64_t capped = std::min(shared, std::max<int64_t>(L - 1, 0));
    result_.max_hit_tokens += capped;
    for (size_t i = 0; i < alignments_.size(); ++i) {
      const int64_t hit = capped / alignments_[i] * alignments_[i];
      alignment_hits_[i] += hit;
      // The block-size cliff (docs/semantics.md §9.3): L <= A leaves floor((L-1) / A) = 0.
      Cliff& cliff = cliff_[i];
      cliff.bins.Add(L, hit);
      if (L < alignments_[i] + 1) {
        ++cliff.never_hit_requests;
        cliff.never_hit_prompt_tokens += L;
      }
    }
    shared_.push_back(shared);
    if (options_.capacity_curve) {
      const int64_t max_hit = block_tokens_ == 0 ? 0 : std::max<int64_t>(L - 1, 0) / block_tokens_;
      sequence_.AddRequest(full_blocks_, static_cast<uint32_t>(max_hit));
    }
  }

  AnalyzeResult Finish();

 private:
  struct Node {
    uint64_t parent_identity;
    uint64_t pieces_begin;
    uint32_t num_pieces;
    uint32_t depth;
    uint32_t next_sibling_same_first;  // chain of siblings with the same first token
  };
  using Forest = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

  uint32_t NewNode(uint64_t id, uint64_t parent, uint32_t parent_node, int64_t length) {
    // Node ids and literal-token offsets are 32-bit: ~4 billion unique blocks or stored tokens.
    PREFIXSIM_CHECK(nodes_.size() < kNoNode);
    PREFIXSIM_CHECK(stored_tokens_.size() + static_cast<uint64_t>(length) < kNoNode);
    const uint32_t node = static_cast<uint32_t>(boost::add_vertex(forest_));
    PREFIXSIM_CHECK(node == nodes_.size());
    if (parent_node != kNoNode) boost::add_edge(parent_node, node, forest_);
    Node n;
    n.parent_identity = parent;
    n.pieces_begin = stored_pieces_.size();
    n.num_pieces = static_cast<uint32_t>(pieces_.size());
    n.depth = parent_node == kNoNode ? 1 : nodes_[parent_node].depth + 1;
    for (const Piece& p : pieces_) {
      StoredPiece s{p.content_id, p.offset, p.length};
      if (p.literal()) {
        s.offset = static_cast<uint32_t>(stored_tokens_.size());
        stored_tokens_.insert(stored_tokens_.end(), p.tokens, p.tokens + p.length);
      }
      stored_pieces_.push_back(s);
    }
    auto [slot, inserted] =
        first_token_index_.try_emplace(Combine(parent, FirstTokenKey(pieces_.front())), node);
    n.next_sibling_same_first = inserted ? kNoNode : slot->second;
    slot->second = node;
    nodes_.push_back(n);
    node_of_.emplace(id, node);
    if (length == block_tokens_) ++result_.unique_full_blocks;
    return node;
  }

  // The longest common prefix of the current block (pieces_) with any earlier block that
  // follows the same parent.
  int64_t BestPartialMatch(uint64_t parent) {
    auto it = first_token_index_.find(Combine(parent, FirstTokenKey(pieces_.front())));
    if (it == first_token_index_.end()) return 0;
    int64_t best = 0;
    for (uint32_t n = it->second; n != kNoNode; n = nodes_[n].next_sibling_same_first) {
      if (nodes_[n].parent_identity != parent) continue;
      LoadPieces(n, &other_);
      best = std::max(best, CommonPrefix(pieces_, other_));
    }
    return best;
  }

  void LoadPieces(uint32_t node, std::vector<Piece>* out) const {
    out->clear();
    const Node& n = nodes_[node];
    for (uint32_t i = 0; i < n.num_pieces; ++i) {
      const StoredPiece& s = stored_pieces_[n.pieces_begin + i];
      Piece p;
      p.content_id = s.content_id;
      p.offset = s.offset;
      p.length = s.length;
      if (p.literal()) p.tokens = stored_tokens_.data() + s.offset;
      out->push_back(p);
    }
  }

  struct StoredPiece {
    uint64_t content_id;
    uint32_t offset;  // literal: index into stored_tokens_
    uint32_t length;
  };

  // Per alignment: the requests too short to ever hit and the hits by prompt length.
  struct Cliff {
    int64_t never_hit_requests = 0;
    int64_t never_hit_prompt_tokens = 0;
    Log2TokenBins bins;
  };

  const AnalyzeOptions& options_;
  std::vector<int64_t> alignments_;
  std::vector<int64_t> alignment_hits_;
  std::vector<Cliff> cliff_;
  int64_t block_tokens_ = 0;
  AnalyzeResult result_;

  Forest forest_;
  std::vector<Node> nodes_;
  std::vector<StoredPiece> stored_pieces_;
  std::vector<uint32_t> stored_tokens_;
  absl::flat_hash_map<uint64_t, uint32_t> node_of_;            // identity -> node
  absl::flat_hash_map<uint64_t, uint32_t> first_token_index_;  // (parent, first token) -> node

  std::vector<int64_t> shared_;  // per request
  BlockSequence sequence_;
  std::vector<uint32_t> full_blocks_;  // scratch
  std::vector<Piece> pieces_, other_;  // scratch
};

double Ratio(int64_t num, int64_t den) {
  return den == 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den);
}

AnalyzeResult Analyzer::Finish() {
  AnalyzeResult r = std::move(result_);
  r.block_tokens = block_tokens_ == 0 ? options_.block_tokens : block_tokens_;
  r.unique_blocks = static_cast<int64_t>(nodes_.size());
  r.reused_block_fraction = Ratio(r.reused_blocks, r.blocks);
  r.max_hit_rate = Ratio(r.max_hit_tokens, r.prompt_tokens);

  // Forest statistics, from the graph.
  ForestStats& f = r.forest;
  f.nodes = static_cast<int64_t>(boost::num_vertices(forest_));
  f.edges = static_cast<int64_t>(boost::num_edges(forest_));
  std::vector<int64_t> degree_buckets;
  for (auto [v, end] = boost::vertices(forest_); v != end; ++v) {
    const int64_t degree = static_cast<int64_t>(boost::out_degree(*v, forest_));
    f.max_depth = std::max<int64_t>(f.max_depth, nodes_[*v].depth);
    if (nodes_[*v].depth == 1) ++f.roots;
    if (degree == 0) {
      ++f.leaves;
      continue;
    }
    ++f.internal_nodes;
    if (degree >= 2) ++f.branch_nodes;
    f.max_out_degree = std::max(f.max_out_degree, degree);
    size_t bucket = 0;
    while ((int64_t{2} << bucket) <= degree) ++bucket;
    if (degree_buckets.size() <= bucket) degree_buckets.resize(bucket + 1, 0);
    ++degree_buckets[bucket];
  }
  f.mean_internal_out_degree = Ratio(f.edges, f.internal_nodes);
  for (size_t i = 0; i < degree_buckets.size(); ++i) {
    f.out_degree_histogram.push_back({int64_t{1} << i, (int64_t{2} << i) - 1, degree_buckets[i]});
  }

  // Shared-prefix distribution.
  SharedPrefixStats& s = r.shared_prefix;
  std::vector<int64_t> histogram;
  for (int64_t len : shared_) {
    s.shared_tokens += len;
    if (len > 0) ++s.requests_with_shared_prefix;
    size_t bucket = 0;
    while (bucket < 63 && (int64_t{1} << bucket) <= len) ++bucket;
    if (histogram.size() <= bucket) histogram.resize(bucket + 1, 0);
    ++histogram[bucket];
  }
  for (size_t i = 0; i < histogram.size(); ++i) {
    const int64_t lo = i == 0 ? 0 : int64_t{1} << (i - 1);
    const int64_t hi = i == 0 ? 0 : (int64_t{1} << i) - 1;
    s.histogram.push_back({lo, hi, histogram[i]});
  }
  if (!shared_.empty()) {
    std::sort(shared_.begin(), shared_.end());
    auto rank = [&](double q) {  // nearest rank
      size_t k = static_cast<size_t>(q * static_cast<double>(shared_.size()) + 0.999999);
      k = std::clamp<size_t>(k, 1, shared_.size());
      return shared_[k - 1];
    };
    s.mean_tokens = Ratio(s.shared_tokens, static_cast<int64_t>(shared_.size()));
    s.p50_tokens = rank(0.5);
    s.p90_tokens = rank(0.9);
    s.p99_tokens = rank(0.99);
    s.max_tokens = shared_.back();
  }

  for (size_t i = 0; i < alignments_.size(); ++i) {
    r.alignment_curve.push_back(
        {alignments_[i], alignment_hits_[i], Ratio(alignment_hits_[i], r.prompt_tokens)});
  }
  // The cliff's bins: every alignment saw the same prompts, so the same bins are non-empty.
  for (size_t i = 0; i < alignments_.size(); ++i) {
    const Cliff& c = cliff_[i];
    CliffPoint p;
    p.alignment = alignments_[i];
    p.never_hit_short_requests = c.never_hit_requests;
    p.never_hit_short_prompt_tokens = c.never_hit_prompt_tokens;
    p.never_hit_short_share = Ratio(c.never_hit_requests, r.requests);
    p.never_hit_short_token_share = Ratio(c.never_hit_prompt_tokens, r.prompt_tokens);
    for (int k = c.bins.First(); k <= c.bins.Last(); ++k) {
      p.bins.push_back({Log2BinMin(k), Log2BinMax(k), c.bins.requests[k], c.bins.prompt_tokens[k],
                        c.bins.hit_tokens[k], c.bins.HitFraction(k)});
    }
    r.cliff.push_back(std::move(p));
  }

  if (options_.capacity_curve) {
    std::vector<int64_t> capacities = options_.capacities;
    if (capacities.empty()) {
      for (int64_t c = 1; c < r.unique_full_blocks; c *= 2) capacities.push_back(c);
      if (r.unique_full_blocks > 0) capacities.push_back(r.unique_full_blocks);
    }
    std::sort(capacities.begin(), capacities.end());
    capacities.erase(std::unique(capacities.begin(), capacities.end()), capacities.end());
    const std::vector<uint32_t> next_use = analyze_internal::ComputeNextUse(sequence_);
    for (int64_t c : capacities) {
      CapacityPoint p;
      p.capacity_blocks = c;
      p.lru_hit_tokens = analyze_internal::SimulateLru(sequence_, c) * r.block_tokens;
      p.optimal_hit_tokens =
          analyze_internal::SimulateBelady(sequence_, next_use, c) * r.block_tokens;
      p.lru_hit_rate = Ratio(p.lru_hit_tokens, r.prompt_tokens);
      p.optimal_hit_rate = Ratio(p.optimal_hit_tokens, r.prompt_tokens);
      r.capacity_curve.push_back(p);
    }
  }
  return r;
}

}  // namespace

std::vector<int64_t> DefaultAnalyzeAlignments() {
  std::vector<int64_t> a;
  for (int64_t x = 16; x <= 16384; x *= 2) a.push_back(x);
  return a;
}

absl::StatusOr<AnalyzeResult> AnalyzeRequestStream(const RequestSource& next,
                                                   const AnalyzeOptions& options) {
  PREFIXSIM_RETURN_IF_ERROR(ValidateOptions(options));
  Analyzer analyzer(options);
  Request request;
  for (uint64_t index = 0;; ++index) {
    PREFIXSIM_ASSIGN_OR_RETURN(bool more, next(&request));
    if (!more) break;
    PREFIXSIM_RETURN_IF_ERROR(ValidateRequest(request, index));
    analyzer.Add(request);
  }
  return analyzer.Finish();
}

absl::StatusOr<AnalyzeResult> AnalyzeRequests(absl::Span<const Request> requests,
                                              const AnalyzeOptions& options) {
  PREFIXSIM_RETURN_IF_ERROR(ValidateOptions(options));
  Analyzer analyzer(options);
  for (size_t i = 0; i < requests.size(); ++i) {
    PREFIXSIM_RETURN_IF_ERROR(ValidateRequest(requests[i], i));
    analyzer.Add(requests[i]);
  }
  return analyzer.Finish();
}

}  // namespace prefixsim
