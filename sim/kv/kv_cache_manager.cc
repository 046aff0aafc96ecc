// KvCacheManager (docs/semantics.md §9.1, §10.1, §12): the public face of the KV memory model,
// forwarding to its state (kv_cache_state.h).
#include "prefixsim/kv_cache_manager.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/cache_contents.h"
#include "sim/kv/fast_path.h"
#include "sim/kv/kv_cache_state.h"
#include "sim/util/status_macros.h"

namespace prefixsim {

using kv::BlockId;
using kv::kNullBlock;

uint64_t GeneratedOutputContentId(uint64_t request_id) {
  return kv::GeneratedContentId(request_id);
}

std::string PrefixCachingDisabledWarning(const KvPlan& plan) {
  if (!plan.enable_prefix_caching || plan.groups.empty()) return "";
  const int g = kv::KvCacheCoordinator::UnhashableGroup(plan);
  if (g < 0) return "";
  return absl::StrFormat(
      "KvCacheManager: prefix caching disabled: group %d block size %d is not a multiple of the "
      "hash block size %lld",
      g, plan.groups[g].block_size,
      static_cast<long long>(kv::KvCacheCoordinator::HashBlockSize(plan)));
}

KvCacheManager::KvCacheManager(const KvPlan& plan, const KvCacheOptions& options)
    : state_(std::make_unique<kv::KvCacheState>(plan, options)) {}
KvCacheManager::~KvCacheManager() = default;

KvRequestHandle KvCacheManager::AddRequest(const Request* request) {
  return state_->AddRequest(request);
}
void KvCacheManager::RemoveRequest(uint64_t request_id) { state_->RemoveRequest(request_id); }
KvRequestHandle KvCacheManager::Handle(uint64_t request_id) const {
  return state_->Handle(request_id);
}
void KvCacheManager::SetNumTokens(KvRequestHandle request, int64_t num_tokens) {
  state_->SetNumTokens(request, num_tokens);
}
PrefixHit KvCacheManager::GetComputedBlocks(KvRequestHandle request) {
  return state_->GetComputedBlocks(request);
}
bool KvCacheManager::AllocateSlots(KvRequestHandle request, int64_t num_computed_tokens,
                                   int64_t num_new_tokens, int64_t num_new_computed_tokens,
                                   int64_t num_lookahead_tokens) {
  return state_->AllocateSlots(request, num_computed_tokens, num_new_tokens,
                               num_new_computed_tokens, num_lookahead_tokens);
}
void KvCacheManager::Free(KvRequestHandle request) { state_->Free(request); }
bool KvCacheManager::FullSequenceFits(KvRequestHandle request) const {
  return state_->FullSequenceFits(request);
}
void KvCacheManager::NewStep() { state_->NewStep(); }

void KvCacheManager::SetCacheEventListener(CacheEventListener* listener) {
  state_->pool().set_listener(listener);
}

void KvCacheManager::SetKvEventSink(KvEventSink* sink) { state_->pool().set_event_sink(sink); }

PromptHashes KvCacheManager::PromptHashesAt(const Request& request, int64_t hash_tokens) {
  PREFIXSIM_CHECK(hash_tokens > 0);
  PromptHashes pre;
  if (request.prompt_tokens <= 1) return pre;
  // The chunks the admission lookup reads first (max_hit = prompt - 1, docs/semantics.md §9.1); a
  // router that wants one more (HashPrompt) extends from the cursor.
  kv::HashCursor cursor;
  kv::ExtendBlockHashes(request, hash_tokens, (request.prompt_tokens - 1) / hash_tokens, &cursor,
                        &pre.hashes);
  pre.chunk_tokens = hash_tokens;
  pre.next_segment = cursor.segment;
  pre.next_offset_in_segment = cursor.offset_in_seg;
  return pre;
}

void KvCacheManager::PrepareRequest(const KvPlan& plan, Request* request) {
  PREFIXSIM_CHECK(request != nullptr);
  PromptHashes& pre = request->prompt_hashes;
  if (!plan.enable_prefix_caching || plan.groups.empty()) {
    pre = PromptHashes{};
    return;
  }
  const int64_t h = kv::KvCacheCoordinator::HashBlockSize(plan);
  // Hashed ahead at this H already (a search that replays one parsed trace under many plans
  // hashes each prompt once per H): the hashes depend on the content alone.
  if (h > 0 && pre.chunk_tokens == h) return;
  pre = h > 0 ? PromptHashesAt(*request, h) : PromptHashes{};
}

int64_t KvCacheManager::num_free_blocks() const { return state_->pool().num_free(); }
int64_t KvCacheManager::UnpublishedAlignmentTokens(int64_t computed_tokens) const {
  if (!state_->caching()) return 0;
  return state_->coordinator().UnpublishedAlignmentTokens(computed_tokens);
}

int64_t KvCacheManager::num_usable_blocks() const { return state_->pool().num_blocks() - 1; }
double KvCacheManager::usage() const {
  return 1.0 - static_cast<double>(num_free_blocks()) / static_cast<double>(num_usable_blocks());
}
const KvCacheCounters& KvCacheManager::counters() const {
  KvCacheCounters& counters = state_->counters();
  counters.evicted_blocks = state_->pool().evictions();
  counters.hash_collisions = state_->pool().collisions();
  return counters;
}
const KvPlan& KvCacheManager::plan() const { return state_->plan(); }
std::vector<int32_t> KvCacheManager::BlockTable(uint64_t request_id, int group) const {
  const kv::RequestState& st = state_->requests()[request_id];
  PREFIXSIM_CHECK(group >= 0 && group < static_cast<int>(st.groups.size()));
  return st.groups[group].blocks;
}
int64_t KvCacheManager::NumHeldBlocks(uint64_t request_id) const {
  const kv::RequestState& st = state_->requests()[request_id];
  int64_t n = 0;
  for (const auto& g : st.groups) {
    for (BlockId b : g.blocks) n += b != kNullBlock;
  }
  return n;
}
void KvCacheManager::CheckInvariants() const { state_->CheckInvariants(); }

namespace kv {

void SetFastPath(KvCacheManager& manager, bool on) { manager.impl()->set_fast_path(on); }

std::vector<std::pair<int, ChunkHash>> CachedBlockList(const KvCacheManager& manager) {
  const BlockPool& pool = manager.impl()->pool();
  std::vector<std::pair<int, ChunkHash>> out;
  for (BlockId b = 1; b < pool.num_ever_allocated(); ++b) {
    if (pool.is_cached(b)) out.emplace_back(pool.cached_group(b), pool.cached_hash(b));
  }
  return out;
}

}  // namespace kv
}  // namespace prefixsim
