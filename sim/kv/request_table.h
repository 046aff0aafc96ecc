// The requests a KV cache tracks (vLLM's req_to_blocks and the scheduler-side request fields the
// manager reads): one slot per request, named by a KvRequestHandle so that the per-step calls
// need no id lookup, and reused after RemoveRequest.
#ifndef PREFIXSIM_SIM_KV_REQUEST_TABLE_H_
#define PREFIXSIM_SIM_KV_REQUEST_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/request.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/quiet_ranges.h"
#include "sim/kv/single_type_manager.h"
#include "sim/util/status_macros.h"

namespace prefixsim::kv {

// alignas(64), and what every decode step reads (SetNumTokens, the AllocateSlots fast path) in
// the first two cache lines: a step visits every running request.
struct alignas(64) RequestState {
  // The counts of the last successful AllocateSlots may move inside this window without crossing
  // a breakpoint (QuietRanges), if quiet_valid.
  QuietRanges::Window quiet_ranges{};
  int64_t num_tokens = 0;
  std::vector<HashPair> hashes;  // one per full H-chunk, extended lazily
  // The previous step of this request: where its verified (non-draft) tokens ended, and whether
  // drafts rode along (a verify step). For mamba states under speculation.
  int64_t prev_verified_end = 0;
  bool prev_had_drafts = false;
  bool quiet_valid = false;
  bool has_pending = false;
  const Request* request = nullptr;
  HashCursor cursor;
  std::vector<GroupBlocks> groups;
  int64_t pending_hit = 0;
  std::vector<std::vector<BlockId>> pending;  // per group: hit blocks from GetComputedBlocks
  int64_t shadow_held = 0;                    // U-blocks [0, shadow_held) held in the shadow index
  int64_t shadow_published = 0;        // held U-blocks [0, shadow_published) marked published
  int64_t shared_prefix_boundary = 0;  // of the last lookup (PrefixHit), for retention masks
};

class RequestTable {
 public:
  // A fresh slot for `request`, its block tables sized for `num_groups` groups and empty.
  // REQUIRES: the id is not tracked.
  KvRequestHandle Add(const Request* request, int num_groups) {
    uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    PREFIXSIM_CHECK(index_.emplace(request->id, slot).second);  // ids are unique
    RequestState& st = slots_[slot];
    st.request = request;
    st.num_tokens = request->prompt_tokens;
    st.hashes.clear();
    st.cursor = HashCursor{};
    st.groups.resize(num_groups);
    for (GroupBlocks& g : st.groups) g.Clear();
    st.pending.resize(num_groups);
    for (auto& p : st.pending) p.clear();
    st.has_pending = false;
    st.pending_hit = 0;
    st.quiet_valid = false;
    st.shadow_held = 0;
    st.shadow_published = 0;
    st.shared_prefix_boundary = 0;
    st.prev_verified_end = 0;
    st.prev_had_drafts = false;
    return KvRequestHandle{slot};
  }

  // REQUIRES: tracked, and its blocks freed.
  void Remove(uint64_t id) {
    auto it = index_.find(id);
    PREFIXSIM_CHECK(it != index_.end());
    RequestState& st = slots_[it->second];
    for (const GroupBlocks& g : st.groups) PREFIXSIM_CHECK(g.blocks.empty());  // Free() first
    PREFIXSIM_CHECK(st.shadow_held == 0);
    st.request = nullptr;
    st.has_pending = false;
    free_slots_.push_back(it->second);
    index_.erase(it);
  }

  KvRequestHandle Handle(uint64_t id) const {
    auto it = index_.find(id);
    PREFIXSIM_CHECK(it != index_.end());
    return KvRequestHandle{it->second};
  }
  RequestState& operator[](KvRequestHandle h) {
    PREFIXSIM_DCHECK(h.slot < slots_.size() && slots_[h.slot].request != nullptr);
    return slots_[h.slot];
  }
  const RequestState& operator[](KvRequestHandle h) const {
    PREFIXSIM_DCHECK(h.slot < slots_.size() && slots_[h.slot].request != nullptr);
    return slots_[h.slot];
  }
  const RequestState& operator[](uint64_t id) const { return (*this)[Handle(id)]; }

  bool empty() const { return index_.empty(); }
  // Calls f(id, state) for every tracked request.
  template <typename F>
  void ForEach(F&& f) const {
    for (const auto& [id, slot] : index_) f(id, slots_[slot]);
  }

 private:
  absl::flat_hash_map<uint64_t, uint32_t> index_;
  std::vector<RequestState> slots_;
  std::vector<uint32_t> free_slots_;
};

}  // namespace prefixsim::kv

#endif  // PREFIXSIM_SIM_KV_REQUEST_TABLE_H_
