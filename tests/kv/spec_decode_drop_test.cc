// Speculative decoding with mamba groups and EAGLE-style drafters (issue 33, area 1): which methods
// drop the last matched unit, how the mamba-aligned prefill split moves under that drop, and the
// hybrid fixed point re-applying the drop after another group shrinks the hit
// (docs/semantics.md §9.3, §9.4, §11.1).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/block_pool.h"
#include "sim/kv/coordinator.h"
#include "sim/sched/scheduler.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

using testing_kv::Group;
using testing_kv::Iota;
using testing_kv::Literal;
using testing_kv::Plan;

struct DropCase {
  const char* method;
  bool drops;
};

// docs/semantics.md §9.4: the proposers that draft from the target's hidden states (vLLM's
// SpeculativeConfig.use_eagle(): eagle, eagle3, mtp, dspark) need the hidden state of the token
// before the generation point, so the last matched unit is recomputed; draft models do not.
constexpr DropCase kDropTable[] = {
    {"eagle", true}, {"eagle3", true}, {"mtp", true}, {"dspark", true}, {"draft_model", false},
};

// Kimi-K3-like (MLA target + KDA mamba) on the kimi-k3 engine (tensor parallel 4, mamba align
// mode) with one speculative token of `method`.
struct MambaSpecPlan {
  KvPlan plan;
  EngineConfig engine;
};

MambaSpecPlan KimiWith(const std::string& method, bool disable_drop = false,
                       bool prefix_caching = true) {
  MambaSpecPlan out;
  auto engine = LoadEngine("kimi-k3");
  EXPECT_TRUE(engine.ok()) << engine.status();
  out.engine = *engine;
  out.engine.speculative.enabled = true;
  out.engine.speculative.method = method;
  out.engine.speculative.num_speculative_tokens = 1;
  out.engine.speculative.disable_eagle_block_drop = disable_drop;
  out.engine.enable_prefix_caching = prefix_caching;
  ModelLoadOptions options;
  options.tensor_parallel_size = out.engine.tensor_parallel_size;
  auto model = LoadModel("kimi-k3-like", options);
  EXPECT_TRUE(model.ok()) << model.status();
  auto plan = ResolveKvPlan(*model, out.engine, "new");
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (plan.ok()) out.plan = *plan;
  return out;
}

bool AnyEagleGroup(const KvPlan& plan) {
  for (const KvGroup& g : plan.groups) {
    if (g.is_eagle_group) return true;
  }
  return false;
}

const KvGroup* MambaGroup(const KvPlan& plan) {
  for (const KvGroup& g : plan.groups) {
    if (g.kind == LayerKind::kMamba) return &g;
  }
  return nullptr;
}

// docs/semantics.md §9.4: method -> drop, on a mamba hybrid plan; the scheduler sees the same
// answer (SchedulerConfig::use_eagle moves the last cacheable mamba position, §11.1).
TEST(SpecDecodeDropTest, MethodTableOnAMambaHybrid) {
  for (const DropCase& c : kDropTable) {
    SCOPED_TRACE(c.method);
    const MambaSpecPlan p = KimiWith(c.method);
    ASSERT_NE(MambaGroup(p.plan), nullptr);
    EXPECT_EQ(AnyEagleGroup(p.plan), c.drops);
    EXPECT_EQ(SchedulerConfig::From(p.plan, p.engine).use_eagle, c.drops);
  }
}

// docs/semantics.md §9.4: speculative.disable_eagle_block_drop (vLLM's, default false) turns the
// drop off for every method, and without prefix caching there is nothing to drop.
TEST(SpecDecodeDropTest, DisableAndNoPrefixCaching) {
  EXPECT_TRUE(AnyEagleGroup(KimiWith("dspark").plan));
  EXPECT_FALSE(AnyEagleGroup(KimiWith("dspark", /*disable_drop=*/true).plan));
  EXPECT_FALSE(AnyEagleGroup(KimiWith("mtp", /*disable_drop=*/true).plan));
  EXPECT_FALSE(AnyEagleGroup(KimiWith("mtp", false, /*prefix_caching=*/false).plan));
}

// docs/semantics.md §11.1: the last cacheable mamba position is the prompt floored to the mamba
// block, one block earlier when the drop applies; the first chunk of an unshared prompt stops
// there. Checked for every method of the table on the real plan (its mamba block size).
TEST(SpecDecodeDropTest, MambaAlignedSplitUnderEachMethod) {
  for (const DropCase& c : kDropTable) {
    SCOPED_TRACE(c.method);
    const MambaSpecPlan p = KimiWith(c.method);
    SchedulerConfig config = SchedulerConfig::From(p.plan, p.engine);
    const int64_t b = config.mamba_align_block_size;
    ASSERT_GT(b, 0);
    config.max_num_batched_tokens = 16 * b;  // the whole prompt fits one step
    SimRequest r;
    r.prompt_tokens = r.num_tokens = 3 * b + 5;
    const int64_t want = c.drops ? 2 * b : 3 * b;
    EXPECT_EQ(MambaAlignedSplit(config, r, r.prompt_tokens, 0), want);
  }
}

// docs/semantics.md §11.1 on hand-made numbers (block 32): the drop's one-block step back, and its
// floor at 0 for a prompt shorter than two blocks.
TEST(SpecDecodeDropTest, MambaAlignedSplitEagleStepsBackOneBlock) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 8192;
  c.mamba_align_block_size = 32;
  SimRequest r;
  r.prompt_tokens = r.num_tokens = 104;
  EXPECT_EQ(MambaAlignedSplit(c, r, 104, 0), 96);
  c.use_eagle = true;
  EXPECT_EQ(MambaAlignedSplit(c, r, 104, 0), 64);
  EXPECT_EQ(MambaAlignedSplit(c, r, 40, 64), 40);
  // A prompt ending exactly on a boundary: the last cacheable position is the prompt's end (no
  // stop inside it) without the drop, one block earlier with it.
  r.prompt_tokens = r.num_tokens = 96;
  EXPECT_EQ(MambaAlignedSplit(c, r, 96, 0), 64);
  c.use_eagle = false;
  EXPECT_EQ(MambaAlignedSplit(c, r, 96, 0), 96);
  c.use_eagle = true;
  // 40 tokens: last cacheable 32, minus one block = 0: no stop inside the prompt.
  r.prompt_tokens = r.num_tokens = 40;
  EXPECT_EQ(MambaAlignedSplit(c, r, 40, 0), 40);
}

class RedropTest : public ::testing::Test {
 protected:
  void Init(const KvPlan& plan, int num_tokens) {
    plan_ = plan;
    pool_ = std::make_unique<kv::BlockPool>(plan.num_blocks);
    coord_ = std::make_unique<kv::KvCacheCoordinator>(plan_, pool_.get(), 0);
    request_ = Literal(1, Iota(num_tokens));
    kv::HashCursor cur;
    hashes_.clear();
    kv::ExtendBlockHashes(request_, coord_->hash_block_size(),
                          num_tokens / coord_->hash_block_size(), &cur, &hashes_);
    out_.assign(plan.groups.size(), {});
  }
  void CacheBlock(int g, int64_t j) {
    const kv::BlockId b = pool_->Allocate();
    EXPECT_TRUE(pool_->Cache(b, g, coord_->manager(g).BlockHash(hashes_.data(), j)));
    pool_->Free(b);
  }
  int64_t Find(int64_t max_hit) {
    return coord_->FindLongestCacheHit(pool_->hit_index(), hashes_.data(),
                                       static_cast<int64_t>(hashes_.size()), max_hit,
                                       coord_->hit_alignment(), out_.data());
  }

  KvPlan plan_;
  std::unique_ptr<kv::BlockPool> pool_;
  std::unique_ptr<kv::KvCacheCoordinator> coord_;
  Request request_;
  std::vector<kv::HashPair> hashes_;
  std::vector<std::vector<kv::BlockId>> out_;
};

// docs/semantics.md §9.3 (`elif h < cur: clear eagle_ok`) and §9.4: when a later group shrinks the
// hit, the eagle group must apply its drop again at the new candidate, so the candidate needs one
// more cached eagle block past it. Three spec-groups (no "simple hybrid" shortcut), all B = 8,
// S = H = A = 8, 64 tokens, max_hit 63:
//   full attention: blocks 0..3 (32 tokens);
//   SWA W = 9, eagle (need 1 + 1 for the drop): blocks 0, 1, 3, 4 (block 2 missing);
//   mamba: states at 8 and 16 (blocks 0, 1).
// Pass 1: full 32; eagle searches to 40, finds blocks 3, 4, drops one: 32; mamba shrinks to 16 and
// clears eagle_ok. Pass 2: eagle re-drops, searching to 24: block 2 is missing, blocks 0, 1 make
// the run, the drop leaves 8; mamba 8. Pass 3 confirms 8. Without the re-drop the eagle group
// would accept 16 (block 1) although the block past it (2) is not cached.
TEST_F(RedropTest, ShrinkByAnotherGroupReappliesTheDrop) {
  Init(Plan({Group(LayerKind::kFullAttention, 8), Group(LayerKind::kSlidingWindow, 8, 9, true),
             Group(LayerKind::kMamba, 8)},
            64, 8, 8, 8),
       64);
  for (int j = 0; j < 4; ++j) CacheBlock(0, j);
  for (int j : {0, 1, 3, 4}) CacheBlock(1, j);
  for (int j : {0, 1}) CacheBlock(2, j);
  EXPECT_EQ(Find(63), 8);
  EXPECT_EQ(out_[0].size(), 1u);
  EXPECT_EQ(out_[1].size(), 1u);
  EXPECT_EQ(out_[2].size(), 1u);
  // With the eagle group's block 2 cached, 16 survives the re-drop.
  CacheBlock(1, 2);
  EXPECT_EQ(Find(63), 16);
}

}  // namespace
}  // namespace prefixsim
