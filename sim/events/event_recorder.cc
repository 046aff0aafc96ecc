#include "sim/events/event_recorder.h"

#include <utility>

#include "sim/kv/block_hasher.h"
#include "sim/kv/coordinator.h"
#include "sim/util/status_macros.h"

namespace prefixsim::events {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::string SpecKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kFullAttention:
      return "full_attention";
    case LayerKind::kMla:
      return "mla_attention";
    case LayerKind::kSlidingWindow:
      return "sliding_window";
    case LayerKind::kChunkedLocal:
      return "chunked_local_attention";
    case LayerKind::kMamba:
      return "mamba";
  }
  return "unknown";
}

int64_t VirtualTokenId(uint64_t content_id, uint64_t offset) {
  return static_cast<int64_t>(Mix(Mix(content_id) ^ offset) & 0x7fffffff);
}

std::vector<int64_t> TokenIds(const Request& request, int64_t begin, int64_t end) {
  std::vector<int64_t> out;
  if (end <= begin) return out;
  out.reserve(static_cast<size_t>(end - begin));
  int64_t pos = 0;  // first token of the current segment
  int64_t known_output = 0;
  auto take = [&](const ContentSegment& s) {
    const int64_t from = std::max(begin, pos), to = std::min(end, pos + s.length);
    for (int64_t p = from; p < to; ++p) {
      const uint64_t offset = s.offset + static_cast<uint64_t>(p - pos);
      out.push_back(s.content_id == ContentSegment::kLiteralContent
                        ? static_cast<int64_t>(request.literal_tokens[offset])
                        : VirtualTokenId(s.content_id, offset));
    }
    pos += s.length;
  };
  for (const ContentSegment& s : request.prompt) {
    if (pos >= end) return out;
    take(s);
  }
  for (const ContentSegment& s : request.output) {
    if (pos >= end) return out;
    take(s);
    known_output += s.length;
  }
  // The engine's own output continues the generated content stream (sim/kv/block_hasher.cc).
  const uint64_t generated = kv::GeneratedContentId(request.id);
  for (int64_t p = std::max(begin, pos); p < end; ++p) {
    out.push_back(VirtualTokenId(generated, static_cast<uint64_t>(known_output + (p - pos))));
  }
  return out;
}

EventRecorder::EventRecorder(const KvPlan& plan, int replica, BatchHandler handler,
                             bool hold_until_delivered)
    : replica_(replica), handler_(std::move(handler)), hold_(hold_until_delivered) {
  if (!plan.groups.empty()) hash_block_size_ = kv::KvCacheCoordinator::HashBlockSize(plan);
  for (const KvGroup& g : plan.groups) {
    GroupInfo info;
    info.block_size = g.block_size;
    info.chunks_per_block = hash_block_size_ > 0 ? g.block_size / hash_block_size_ : 0;
    info.kind = SpecKindName(g.kind);
    if (g.kind == LayerKind::kSlidingWindow) info.sliding_window = g.sliding_window;
    groups_.push_back(std::move(info));
  }
  cursor_.assign(groups_.size(), 0);
}

void EventRecorder::OnCachingRequest(const Request& request, const ChunkHash* chunks,
                                     int64_t num_chunks) {
  request_ = &request;
  chunks_ = chunks;
  num_chunks_ = num_chunks;
  if (request.id != cursor_request_id_) {
    cursor_request_id_ = request.id;
    cursor_.assign(groups_.size(), 0);
  }
}

int64_t EventRecorder::FindChunk(int group, const ChunkHash& hash) {
  int64_t& cursor = cursor_[group];
  for (int pass = 0; pass < 2; ++pass) {
    const int64_t from = pass == 0 ? cursor : 0, to = pass == 0 ? num_chunks_ : cursor;
    for (int64_t i = from; i < to; ++i) {
      if (chunks_[i] == hash) {
        cursor = i + 1;
        return i;
      }
    }
  }
  return -1;
}

void EventRecorder::OnBlockStored(int group, const ChunkHash& hash) {
  PREFIXSIM_CHECK(group >= 0 && group < static_cast<int>(groups_.size()));
  const GroupInfo& g = groups_[group];
  const int64_t chunk = request_ != nullptr ? FindChunk(group, hash) : -1;
  // A store always comes from a caching call that named its request first (KvCacheManager).
  PREFIXSIM_CHECK(chunk >= 0);
  // A block ends at its chunk. It starts a block size earlier, except the tail block that partial
  // hits publish before it is full (docs/semantics.md §8.2): it starts at its block boundary.
  const int64_t end_token = (chunk + 1) * hash_block_size_;
  const int64_t start_token = (end_token - 1) / g.block_size * g.block_size;
  const int64_t start_chunk = start_token / hash_block_size_;
  std::vector<int64_t> tokens = TokenIds(*request_, start_token, end_token);
  if (!pending_.empty() && last_group_ == group && last_request_id_ == request_->id &&
      chunk == last_chunk_ + g.chunks_per_block) {
    if (auto* stored = std::get_if<BlockStored>(&pending_.back()); stored != nullptr) {
      stored->block_hashes.push_back(hash.hash);
      stored->token_ids.insert(stored->token_ids.end(), tokens.begin(), tokens.end());
      last_chunk_ = chunk;
      return;
    }
  }
  BlockStored e;
  e.block_hashes.push_back(hash.hash);
  if (start_chunk > 0) e.parent_block_hash = chunks_[start_chunk - 1].hash;
  e.token_ids = std::move(tokens);
  e.block_size = g.block_size;
  e.medium = kMediumGpu;
  e.group_idx = group;
  e.kv_cache_spec_kind = g.kind;
  e.kv_cache_spec_sliding_window = g.sliding_window;
  pending_.emplace_back(std::move(e));
  last_group_ = group;
  last_chunk_ = chunk;
  last_request_id_ = request_->id;
}

void EventRecorder::OnBlockRemoved(int group, const ChunkHash& hash) {
  PushRemoved(kMediumGpu, group, hash.hash);
}

void EventRecorder::PushRemoved(const char* medium, int group, uint64_t block_hash) {
  BlockRemoved e;
  e.block_hashes.push_back(block_hash);
  e.medium = medium;
  e.group_idx = group;
  pending_.emplace_back(std::move(e));
  last_group_ = -1;
}

void EventRecorder::OnTierBlockStored(const char* medium, int group, uint64_t block_hash) {
  BlockStored e;
  e.block_hashes.push_back(block_hash);
  e.medium = medium;
  e.group_idx = group;
  pending_.emplace_back(std::move(e));
  last_group_ = -1;
}

void EventRecorder::OnTierBlockRemoved(const char* medium, int group, uint64_t block_hash) {
  PushRemoved(medium, group, block_hash);
}

void EventRecorder::OnStepScheduled(int64_t now_ns) {
  last_group_ = -1;
  if (pending_.empty()) return;
  EventBatch batch;
  batch.ts = static_cast<double>(now_ns) / 1e9;
  batch.events = std::move(pending_);
  pending_.clear();
  batch.data_parallel_rank = replica_;
  ++num_batches_;
  if (hold_) {
    held_.push_back(std::move(batch));
  } else {
    handler_(std::move(batch));
  }
}

void EventRecorder::Deliver() {
  for (EventBatch& batch : held_) handler_(std::move(batch));
  held_.clear();
}

}  // namespace prefixsim::events
