#include "sim/kv/block_hasher.h"

#include <algorithm>
#include <limits>

#include "sim/util/status_macros.h"

namespace prefixsim {
namespace kv {
namespace {

// wyhash-style 64x64->128 multiply-fold; fast and well mixed, not cryptographic.
inline uint64_t Mum(uint64_t a, uint64_t b) {
  const unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

inline uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Two independent folding chains (different constants), advanced in lockstep.
constexpr uint64_t kP0 = 0xa0761d6478bd642fULL, kP1 = 0xe7037ed1a0b428dbULL;
constexpr uint64_t kQ0 = 0x8ebc6af09c88c6e3ULL, kQ1 = 0x589965cc75374cc3ULL;
// Seeds of the chains (vLLM's NONE_HASH plays this role for the first block).
constexpr uint64_t kSeedP = 0x1d8e4e27c47d124fULL, kSeedQ = 0x5bd1e9955bd1e995ULL;
// Piece tags keep literal runs and virtual runs apart.
constexpr uint64_t kTagLiteral = 0x4c49544552414c00ULL;  // "LITERAL"
constexpr uint64_t kTagVirtual = 0x5649525455414c00ULL;  // "VIRTUAL"
constexpr uint64_t kTagGenerated = 0x67656e6572617465ULL;

struct Folder {
  uint64_t p, q;
  inline void Fold(uint64_t v) {
    p = Mum(p ^ kP0, v ^ kP1);
    q = Mum(q ^ kQ0, v ^ kQ1) + v;
  }
};

// Returns segment `index` of the request's content stream: prompt, then known output, then one
// unbounded generated segment.
inline ContentSegment SegmentAt(const Request& r, int64_t index) {
  const int64_t np = static_cast<int64_t>(r.prompt.size());
  if (index < np) return r.prompt[index];
  const int64_t no = static_cast<int64_t>(r.output.size());
  if (index < np + no) return r.output[index - np];
  PREFIXSIM_DCHECK(index == np + no);
  int64_t known = 0;
  for (const ContentSegment& s : r.output) known += s.length;
  ContentSegment g;
  g.content_id = GeneratedContentId(r.id);
  g.offset = static_cast<uint32_t>(known);
  g.length = std::numeric_limits<uint32_t>::max() - g.offset;
  return g;
}

}  // namespace

uint64_t GeneratedContentId(uint64_t request_id) {
  const uint64_t id = SplitMix(request_id ^ kTagGenerated);
  return id == ContentSegment::kLiteralContent ? 1 : id;
}

void ExtendBlockHashes(const Request& r, int64_t chunk_tokens, int64_t num_chunks, HashCursor* cur,
                       std::vector<HashPair>* hashes) {
  PREFIXSIM_CHECK(chunk_tokens > 0);
  PREFIXSIM_DCHECK(static_cast<int64_t>(hashes->size()) * chunk_tokens == cur->tokens);
  if (static_cast<int64_t>(hashes->size()) >= num_chunks) return;
  hashes->reserve(num_chunks);
  const int64_t num_segments =
      static_cast<int64_t>(r.prompt.size() + r.output.size()) + 1;  // + generated
  ContentSegment seg = SegmentAt(r, cur->segment);
  while (static_cast<int64_t>(hashes->size()) < num_chunks) {
    Folder f;
    if (hashes->empty()) {
      // First block: the namespace key is its extra key (cache_salt / LoRA, docs/semantics.md
      // §8.1).
      f.p = SplitMix(kSeedP ^ r.namespace_key);
      f.q = SplitMix(kSeedQ + r.namespace_key * 0x9e3779b97f4a7c15ULL);
    } else {
      f.p = hashes->back().hash;
      f.q = hashes->back().check;
    }
    int64_t left = chunk_tokens;
    // The open piece: kind (0 none, 1 literal, 2 virtual), and its data.
    int open = 0;
    uint64_t v_id = 0;
    uint64_t v_off = 0;
    uint64_t run_len = 0;
    bool lit_pending = false;
    uint64_t lit_word = 0;
    auto close_piece = [&]() {
      if (open == 1) {
        if (lit_pending) f.Fold(lit_word);
        lit_pending = false;
        f.Fold(kTagLiteral ^ run_len);
      } else if (open == 2) {
        f.Fold(kTagVirtual ^ run_len);
        f.Fold(v_id);
        f.Fold(v_off);
      }
      open = 0;
      run_len = 0;
    };
    while (left > 0) {
      if (cur->offset_in_seg >= seg.length) {
        ++cur->segment;
        PREFIXSIM_CHECK(cur->segment < num_segments);
        cur->offset_in_seg = 0;
        seg = SegmentAt(r, cur->segment);
        continue;
      }
      const uint32_t avail = seg.length - cur->offset_in_seg;
      const uint32_t take = static_cast<uint32_t>(std::min<int64_t>(avail, left));
      const uint32_t start = seg.offset + cur->offset_in_seg;
      if (seg.content_id == ContentSegment::kLiteralContent) {
        if (open != 1) {
          close_piece();
          open = 1;
        }
        PREFIXSIM_CHECK(static_cast<size_t>(start) + take <= r.literal_tokens.size());
        const uint32_t* tok = r.literal_tokens.data() + start;
        uint32_t i = 0;
        if (lit_pending && take > 0) {
          f.Fold(lit_word | (static_cast<uint64_t>(tok[0]) << 32));
          lit_pending = false;
          i = 1;
        }
        for (; i + 1 < take; i += 2) {
          f.Fold(static_cast<uint64_t>(tok[i]) | (static_cast<uint64_t>(tok[i + 1]) << 32));
        }
        if (i < take) {
          lit_word = tok[i];
          lit_pending = true;
        }
        run_len += take;
      } else {
        if (open == 2 && v_id == seg.content_id && v_off + run_len == start) {
          run_len += take;  // canonical merge of contiguous virtual content
        } else {
          close_piece();
          open = 2;
          v_id = seg.content_id;
          v_off = start;
          run_len = take;
        }
      }
      cur->offset_in_seg += take;
      left -= take;
    }
    close_piece();
    HashPair h;
    h.hash = SplitMix(f.p);
    h.check = f.q ^ (f.q >> 29);
    hashes->push_back(h);
    cur->tokens += chunk_tokens;
  }
}

}  // namespace kv
}  // namespace prefixsim
