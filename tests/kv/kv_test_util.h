// Helpers for the KV cache tests: hand-built plans and requests.
#ifndef PREFIXSIM_TESTS_KV_KV_TEST_UTIL_H_
#define PREFIXSIM_TESTS_KV_KV_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "prefixsim/engine_config.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
#include "prefixsim/request.h"

namespace prefixsim {
namespace testing_kv {

// Options that run the manager's invariant checker after every operation.
inline KvCacheOptions Checked() {
  KvCacheOptions o;
  o.check_invariants = true;
  return o;
}

inline KvGroup Group(LayerKind kind, int block_size, int64_t window = 0, bool eagle = false,
                     int64_t chunk = 0) {
  KvGroup g;
  g.kind = kind;
  g.num_layers = 1;
  g.block_size = block_size;
  g.page_bytes = 1024;
  g.sliding_window = window;
  g.attention_chunk_size = chunk;
  g.is_eagle_group = eagle;
  return g;
}

inline KvPlan Plan(std::vector<KvGroup> groups, int64_t num_blocks, int64_t s, int64_t h,
                   int64_t a) {
  KvPlan p;
  p.policy = "test";
  p.groups = std::move(groups);
  p.num_blocks = num_blocks;
  p.scheduler_block_size = s;
  p.hash_block_size = h;
  p.hit_alignment = a;
  p.partial_hits = false;
  p.enable_prefix_caching = true;
  return p;
}

inline KvPlan Unitary(LayerKind kind, int block_size, int64_t num_blocks, int64_t window = 0,
                      bool eagle = false) {
  return Plan({Group(kind, block_size, window, eagle)}, num_blocks, block_size, block_size,
              block_size);
}

// A request whose prompt is the given literal tokens (one segment).
inline Request Literal(uint64_t id, std::vector<uint32_t> tokens, int64_t output_tokens = 16) {
  Request r;
  r.id = id;
  r.prompt_tokens = static_cast<int64_t>(tokens.size());
  r.output_tokens = output_tokens;
  ContentSegment s;
  s.content_id = ContentSegment::kLiteralContent;
  s.offset = 0;
  s.length = static_cast<uint32_t>(tokens.size());
  if (s.length > 0) r.prompt.push_back(s);
  r.literal_tokens = std::move(tokens);
  return r;
}

// Tokens first, first + 1, ..., first + n - 1.
inline std::vector<uint32_t> Iota(int n, uint32_t first = 1) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

inline std::vector<uint32_t> Concat(std::vector<uint32_t> a, const std::vector<uint32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The PR #53007 plan from the presets: Kimi-K3-like with the DSpark drafter under `policy`
// (docs/semantics.md §13.B), with speculative.disable_eagle_block_drop so that hits follow the
// alignment alone, as the PR's arithmetic does (the drop on this plan: speculative_kv_test.cc).
inline KvPlan KimiPlan(const char* policy) {
  auto model = LoadModel("kimi-k3-like");
  auto engine = LoadEngine("kimi-k3-dspark");
  EXPECT_TRUE(model.ok() && engine.ok());
  engine->speculative.disable_eagle_block_drop = true;
  auto plan = ResolveKvPlan(*model, *engine, policy);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : KvPlan{};
}

}  // namespace testing_kv
}  // namespace prefixsim

#endif  // PREFIXSIM_TESTS_KV_KV_TEST_UTIL_H_
