#include "sim/events/cached_blocks.h"

#include <variant>

#include "absl/strings/str_cat.h"

namespace prefixsim::events {

namespace {

// The engine's own pool: an event without a medium (older vLLM), or "GPU".
bool OnGpu(const std::optional<std::string>& medium) {
  return !medium.has_value() || *medium == kMediumGpu;
}

}  // namespace

absl::Status CachedBlocks::Apply(const EventBatch& batch) {
  for (size_t i = 0; i < batch.events.size(); ++i) {
    const KvEvent& event = batch.events[i];
    if (const auto* s = std::get_if<BlockStored>(&event); s != nullptr && !OnGpu(s->medium)) {
      continue;  // an offload tier's block (docs/semantics.md §16)
    }
    if (const auto* r = std::get_if<BlockRemoved>(&event); r != nullptr && !OnGpu(r->medium)) {
      continue;
    }
    if (const auto* s = std::get_if<BlockStored>(&event)) {
      for (ExternalBlockHash h : s->block_hashes) ++blocks_[{s->group_idx.value_or(0), h}];
    } else if (const auto* r = std::get_if<BlockRemoved>(&event)) {
      for (ExternalBlockHash h : r->block_hashes) {
        auto it = blocks_.find({r->group_idx.value_or(0), h});
        if (it == blocks_.end()) {
          return absl::FailedPreconditionError(absl::StrCat("event ", i, " removes block ", h,
                                                            " of group ", r->group_idx.value_or(0),
                                                            ", which is not cached"));
        }
        if (--it->second == 0) blocks_.erase(it);
      }
    } else {
      blocks_.clear();
    }
  }
  return absl::OkStatus();
}

}  // namespace prefixsim::events
