// Micro benchmarks of the prefix cache core (issue 3): hashing (tokens/s), hit lookup
// (blocks/s), allocate/free/evict (blocks/s). Goal: >= 20M block lookups per second on one core.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "prefixsim/kv_cache_manager.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/block_pool.h"
#include "sim/kv/coordinator.h"

namespace prefixsim {
namespace {

KvGroup MakeGroup(LayerKind kind, int block_size, int64_t window = 0) {
  KvGroup g;
  g.kind = kind;
  g.num_layers = 1;
  g.block_size = block_size;
  g.sliding_window = window;
  return g;
}

KvPlan MakePlan(std::vector<KvGroup> groups, int64_t num_blocks, int64_t s, int64_t h, int64_t a) {
  KvPlan p;
  p.groups = std::move(groups);
  p.num_blocks = num_blocks;
  p.scheduler_block_size = s;
  p.hash_block_size = h;
  p.hit_alignment = a;
  return p;
}

Request LiteralRequest(uint64_t id, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Request r;
  r.id = id;
  r.prompt_tokens = n;
  r.literal_tokens.resize(n);
  for (auto& t : r.literal_tokens) t = static_cast<uint32_t>(rng() % 150000);
  ContentSegment s;
  s.length = static_cast<uint32_t>(n);
  r.prompt.push_back(s);
  return r;
}

// Mooncake-style: one virtual segment per 512-token trace block.
Request HashIdRequest(uint64_t id, int64_t n, uint64_t first_block) {
  Request r;
  r.id = id;
  r.prompt_tokens = n;
  for (int64_t t = 0; t < n; t += 512) {
    ContentSegment s;
    s.content_id = first_block + t / 512 + 1;
    s.length = static_cast<uint32_t>(std::min<int64_t>(512, n - t));
    r.prompt.push_back(s);
  }
  return r;
}

void BM_HashLiteralTokens(benchmark::State& state) {
  const int64_t h = state.range(0);
  const Request r = LiteralRequest(1, 12288, 7);
  std::vector<kv::HashPair> hashes;
  for (auto _ : state) {
    hashes.clear();
    kv::HashCursor cur;
    kv::ExtendBlockHashes(r, h, r.prompt_tokens / h, &cur, &hashes);
    benchmark::DoNotOptimize(hashes.data());
  }
  state.SetItemsProcessed(state.iterations() * r.prompt_tokens);
  state.SetLabel("items = tokens");
}
BENCHMARK(BM_HashLiteralTokens)->Arg(16)->Arg(64)->Arg(1536);

void BM_HashVirtualTokens(benchmark::State& state) {
  const int64_t h = state.range(0);
  const Request r = HashIdRequest(1, 12288, 1000);
  std::vector<kv::HashPair> hashes;
  for (auto _ : state) {
    hashes.clear();
    kv::HashCursor cur;
    kv::ExtendBlockHashes(r, h, r.prompt_tokens / h, &cur, &hashes);
    benchmark::DoNotOptimize(hashes.data());
  }
  state.SetItemsProcessed(state.iterations() * r.prompt_tokens);
  state.SetLabel("items = tokens");
}
BENCHMARK(BM_HashVirtualTokens)->Arg(16)->Arg(64)->Arg(1536);

// A pool with `num_requests` fully cached 12K-token requests (B = 16: 768 blocks each); each
// iteration looks up one of them entirely (a full hit: 767 blocks found).
void BM_LookupFullAttention(benchmark::State& state) {
  const int num_requests = static_cast<int>(state.range(0));
  const int64_t n = 12288, b = 16;
  const int64_t blocks_per_req = n / b;
  KvPlan plan = MakePlan({MakeGroup(LayerKind::kFullAttention, b)},
                         num_requests * blocks_per_req + 2, b, b, b);
  kv::BlockPool pool(plan.num_blocks);
  kv::KvCacheCoordinator coord(plan, &pool, 0);
  std::vector<std::vector<kv::HashPair>> hashes(num_requests);
  for (int i = 0; i < num_requests; ++i) {
    const Request r = HashIdRequest(i, n, static_cast<uint64_t>(i) * 1000);
    kv::HashCursor cur;
    kv::ExtendBlockHashes(r, b, n / b, &cur, &hashes[i]);
    for (int64_t j = 0; j < blocks_per_req; ++j) {
      const kv::BlockId id = pool.Allocate();
      pool.Cache(id, 0, hashes[i][j]);
      pool.Free(id);
    }
  }
  std::vector<std::vector<kv::BlockId>> out(1);
  int64_t found = 0;
  int i = 0;
  for (auto _ : state) {
    const auto& h = hashes[i];
    found += coord.FindLongestCacheHit(pool.hit_index(), h.data(), static_cast<int64_t>(h.size()),
                                       n - 1, b, out.data()) /
             b;
    if (++i == num_requests) i = 0;
  }
  benchmark::DoNotOptimize(found);
  state.SetItemsProcessed(found);
  state.SetLabel("items = blocks looked up");
}
BENCHMARK(BM_LookupFullAttention)->Arg(16)->Arg(128)->Arg(1024);

// Hybrid full + sliding window (W = 4096, B = 16: the SWA group needs 256 blocks), both cached.
void BM_LookupHybridSlidingWindow(benchmark::State& state) {
  const int num_requests = 64;
  const int64_t n = 12288, b = 16;
  const int64_t blocks_per_req = n / b;
  KvPlan plan = MakePlan(
      {MakeGroup(LayerKind::kFullAttention, b), MakeGroup(LayerKind::kSlidingWindow, b, 4096)},
      2 * num_requests * blocks_per_req + 2, b, b, b);
  kv::BlockPool pool(plan.num_blocks);
  kv::KvCacheCoordinator coord(plan, &pool, 0);
  std::vector<std::vector<kv::HashPair>> hashes(num_requests);
  for (int i = 0; i < num_requests; ++i) {
    const Request r = HashIdRequest(i, n, static_cast<uint64_t>(i) * 1000);
    kv::HashCursor cur;
    kv::ExtendBlockHashes(r, b, n / b, &cur, &hashes[i]);
    for (int g = 0; g < 2; ++g) {
      for (int64_t j = 0; j < blocks_per_req; ++j) {
        const kv::BlockId id = pool.Allocate();
        pool.Cache(id, g, hashes[i][j]);
        pool.Free(id);
      }
    }
  }
  std::vector<std::vector<kv::BlockId>> out(2);
  int64_t looked_up = 0;
  int i = 0;
  for (auto _ : state) {
    const auto& h = hashes[i];
    const int64_t hit = coord.FindLongestCacheHit(
        pool.hit_index(), h.data(), static_cast<int64_t>(h.size()), n - 1, b, out.data());
    looked_up += hit / b + 256;  // full-attention blocks + the SWA run
    if (++i == num_requests) i = 0;
  }
  state.SetItemsProcessed(looked_up);
  state.SetLabel("items = blocks looked up");
}
BENCHMARK(BM_LookupHybridSlidingWindow);

// Admission of requests with unique content into a full pool through the public API:
// lookup (miss), allocate and cache every block (each allocation evicts a cached block), free.
void BM_AllocateCacheFreeEvict(benchmark::State& state) {
  const int64_t n = 12288, b = 16;
  KvPlan plan = MakePlan({MakeGroup(LayerKind::kFullAttention, b)}, 20000, b, b, b);
  KvCacheManager m(plan);
  std::vector<Request> reqs;
  for (int i = 0; i < 64; ++i) reqs.push_back(HashIdRequest(i, n, 0));
  uint64_t next_content = 1;
  int64_t blocks = 0;
  int i = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Request& r = reqs[i];
    r.id = next_content;
    for (auto& s : r.prompt) s.content_id = ++next_content;  // fresh content: all misses
    state.ResumeTiming();
    m.AddRequest(&r);
    m.GetComputedBlocks(r.id);
    m.AllocateSlots(r.id, 0, n, 0, 0);
    m.Free(r.id);
    m.RemoveRequest(r.id);
    blocks += n / b;
    if (++i == 64) i = 0;
  }
  state.counters["evicted"] = static_cast<double>(m.counters().evicted_blocks);
  state.SetItemsProcessed(blocks);
  state.SetLabel("items = blocks allocated+cached+freed");
}
BENCHMARK(BM_AllocateCacheFreeEvict);

// The pool alone: allocate 768 blocks (evicting cached ones), cache, free tail first.
void BM_PoolAllocateFreeEvict(benchmark::State& state) {
  kv::BlockPool pool(20000);
  std::vector<kv::BlockId> ids(768);
  uint64_t h = 1;
  int64_t blocks = 0;
  for (auto _ : state) {
    for (auto& id : ids) {
      id = pool.Allocate();
      pool.Cache(id, 0, kv::HashPair{h * 0x9e3779b97f4a7c15ULL, h});
      ++h;
    }
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) pool.Free(*it);
    blocks += static_cast<int64_t>(ids.size());
  }
  state.counters["evicted"] = static_cast<double>(pool.evictions());
  state.SetItemsProcessed(blocks);
  state.SetLabel("items = blocks");
}
BENCHMARK(BM_PoolAllocateFreeEvict);

}  // namespace
}  // namespace prefixsim

namespace prefixsim {
namespace {

// Engine-like use of the public API: requests of ~12K tokens in 512-token trace blocks, half of
// each prompt shared with one of 50 "system prompts"; admission lookup, an 8192-token chunked
// prefill, 32 decode steps, free. Items = prompt tokens; also reports requests/s.
void BM_EndToEndRequests(benchmark::State& state) {
  const bool hybrid = state.range(0) != 0;
  const int64_t b = 64;
  KvPlan plan = hybrid ? MakePlan({MakeGroup(LayerKind::kFullAttention, b),
                                   MakeGroup(LayerKind::kSlidingWindow, b, 4096)},
                                  40000, b, b, b)
                       : MakePlan({MakeGroup(LayerKind::kFullAttention, b)}, 40000, b, b, b);
  KvCacheManager m(plan);
  std::mt19937_64 rng(1);
  std::vector<Request> reqs(256);
  uint64_t id = 0, fresh = 1000000;
  int64_t tokens = 0, requests = 0, hits = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Request& r = reqs[id % reqs.size()];
    r = Request();
    r.id = id++;
    r.prompt_tokens = 10240 + static_cast<int64_t>(rng() % 4096);
    const uint64_t sys = rng() % 50;
    for (int64_t t = 0; t < r.prompt_tokens; t += 512) {
      ContentSegment s;
      s.content_id = t < 6144 ? sys * 100 + t / 512 + 1 : ++fresh;
      s.length = static_cast<uint32_t>(std::min<int64_t>(512, r.prompt_tokens - t));
      r.prompt.push_back(s);
    }
    r.output_tokens = 32;
    state.ResumeTiming();
    m.AddRequest(&r);
    const PrefixHit hit = m.GetComputedBlocks(r.id);
    int64_t computed = hit.hit_tokens;
    bool ok = m.AllocateSlots(r.id, 0, std::min<int64_t>(8192, r.prompt_tokens - computed),
                              hit.hit_tokens, 0);
    computed = std::min<int64_t>(r.prompt_tokens, computed + 8192);
    while (ok && computed < r.prompt_tokens) {
      const int64_t n = std::min<int64_t>(8192, r.prompt_tokens - computed);
      ok = m.AllocateSlots(r.id, computed, n, 0, 0);
      computed += n;
    }
    for (int64_t step = 0; ok && step < 32; ++step) {
      m.SetNumTokens(r.id, computed + 1);
      ok = m.AllocateSlots(r.id, computed, 1, 0, 0);
      ++computed;
    }
    m.Free(r.id);
    m.RemoveRequest(r.id);
    tokens += r.prompt_tokens;
    hits += hit.hit_tokens;
    ++requests;
  }
  state.SetItemsProcessed(tokens);
  state.counters["requests_per_s"] =
      benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
  state.counters["hit_rate"] = tokens ? static_cast<double>(hits) / tokens : 0;
  state.SetLabel("items = prompt tokens");
}
BENCHMARK(BM_EndToEndRequests)->Arg(0)->Arg(1);

}  // namespace
}  // namespace prefixsim
