#include "sim/sched/scheduler.h"

#include <algorithm>

#include "sim/util/status_macros.h"

namespace prefixsim {

SchedulerConfig SchedulerConfig::From(const KvPlan& plan, const EngineConfig& engine) {
  SchedulerConfig c;
  c.max_num_batched_tokens = engine.max_num_batched_tokens;
  c.max_num_seqs = engine.max_num_seqs;
  c.max_model_len = engine.max_model_len;
  c.long_prefill_token_threshold = engine.long_prefill_token_threshold;
  c.enable_chunked_prefill = engine.enable_chunked_prefill;
  c.enable_prefix_caching = plan.enable_prefix_caching;
  c.reserve_full_isl = engine.scheduler_reserve_full_isl;
  c.num_lookahead_tokens = engine.speculative.enabled ? engine.speculative.LookaheadTokens() : 0;
  for (const KvGroup& g : plan.groups) {
    if (g.is_eagle_group) c.use_eagle = true;
  }
  if (plan.enable_prefix_caching && engine.mamba_cache_mode == MambaCacheMode::kAlign) {
    for (const KvGroup& g : plan.groups) {
      if (g.kind == LayerKind::kMamba) {
        c.mamba_align_block_size = std::max<int64_t>(c.mamba_align_block_size, g.block_size);
      }
    }
    if (c.mamba_align_block_size > 0 && plan.partial_hits) {
      c.mamba_partial_hit_unit = plan.hash_block_size;
    }
  }
  return c;
}

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager* kv)
    : config_(config), kv_(kv), window_(config.hit_rate_window_requests) {
  PREFIXSIM_CHECK(kv_ != nullptr);
  PREFIXSIM_CHECK(config_.max_num_batched_tokens > 0);
  PREFIXSIM_CHECK(config_.max_num_seqs > 0);
}

// vLLM's _mamba_block_aligned_split (docs/semantics.md §11; docs/semantics.md "Mamba-aligned
// prefill split"): in align mode a mamba state is written only where a step ends, so during a
// prefill (including the re-prefill of a resumed request) a chunk that does not finish the prefill
// ends on a block boundary, and a chunk stops early at the first of these positions strictly inside
// it: the next block boundary (a chunk starting inside a block), the last cacheable position,
// the prompt's last hash boundary (partial hits), and the shared-prefix junction (block-floored),
// so that the states there are cached. Uses the mamba group's block size (vLLM issue #54076).
int64_t MambaAlignedPrefillSplit(const SchedulerConfig& config, const SimRequest& req,
                                 int64_t num_new_tokens, int64_t num_computed) {
  const int64_t b = config.mamba_align_block_size;
  const int64_t start = num_computed;
  const int64_t prefill_end = std::max(req.prompt_tokens, req.num_tokens - 1);
  PREFIXSIM_DCHECK(b > 0 && start < prefill_end);
  int64_t last_cache_position = req.num_tokens - req.num_tokens % b;
  // EAGLE: full attention drops the last matched block, so the last state that can serve a hit
  // is one block earlier.
  if (config.use_eagle) last_cache_position = std::max<int64_t>(last_cache_position - b, 0);
  int64_t end = start + num_new_tokens;
  if (end < prefill_end) {
    // A block wider than a step's prefill allowance is crossed in sub-block chunks (the state
    // stays private until a chunk reaches the boundary); otherwise chunks end on boundaries.
    const int64_t aligned_end = end / b * b;
    if (aligned_end > start || b <= config.MaxPrefillTokens()) end = aligned_end;
  }
  const int64_t u = config.mamba_partial_hit_unit;
  const int64_t tail_boundary = u > 0 ? req.prompt_tokens / u * u : 0;
  const int64_t junction = req.shared_prefix_boundary;
  const int64_t stops[] = {
      start % b != 0 ? (start / b + 1) * b : 0,
      last_cache_position,
      last_cache_position < tail_boundary && tail_boundary < req.prompt_tokens ? tail_boundary : 0,
      // A junction inside a block has no state of its own: the stop is the block before it.
      start < junction && junction < end ? start + (junction - start) / b * b : 0,
  };
  int64_t stop = end;
  for (const int64_t s : stops) {
    if (start < s && s < stop) stop = s;
  }
  return std::max<int64_t>(stop - start, 0);
}

void Scheduler::Preempt(SimRequest* req) {
  kv_->Free(req->kv);
  req->num_computed = 0;
  req->num_drafts = 0;  // spec_token_ids are dropped
  req->load_miss = MissAttribution{};
  req->num_preemptions += 1;
  counters_.preemptions += 1;
  waiting_.push_front(req);
  waiting_tokens_ += req->num_tokens;
}

void Scheduler::Schedule(std::vector<ScheduledSeq>* batch, int64_t now) {
  batch->clear();
  kv_->NewStep();
  int64_t budget = config_.max_num_batched_tokens;
  bool preempted = false;

  // RUNNING requests, in order.
  size_t i = 0;
  while (i < running_.size() && budget > 0) {
    SimRequest* req = running_[i];
    int64_t n = req->num_tokens + req->num_drafts - req->num_computed;
    if (config_.long_prefill_token_threshold > 0) {
      n = std::min(n, config_.long_prefill_token_threshold);
    }
    n = std::min(n, budget);
    n = std::min(n, config_.max_model_len - 1 - req->num_computed);
    n = MambaAlignedSplit(config_, *req, n, req->num_computed);
    if (n <= 0) {
      ++i;
      continue;
    }
    bool scheduled = true;
    while (!kv_->AllocateSlots(req->kv, req->num_computed, n, 0, config_.num_lookahead_tokens)) {
      SimRequest* victim = running_.back();
      running_.pop_back();
      Preempt(victim);
      preempted = true;
      if (victim == req) {
        scheduled = false;
        break;
      }
    }
    if (!scheduled) break;
    const int64_t drafts = std::max<int64_t>(0, req->num_computed + n - req->num_tokens);
    batch->push_back({req, n, req->num_computed + n, static_cast<int32_t>(drafts)});
    budget -= n;
    ++i;
  }

  // WAITING requests, FCFS; none in a step that preempted.
  last_stop_ = AdmissionStop::kNone;
  if (preempted) {
    if (!waiting_.empty()) last_stop_ = AdmissionStop::kPreempted;
    return;
  }
  // A request waiting for its tier load stays in the queue, skipped, until the load ends
  // (vLLM moves it aside and back to the front); the requests behind it may be admitted.
  size_t w = 0;
  while (w < waiting_.size() && budget > 0) {
    if (static_cast<int64_t>(running_.size()) >= config_.max_num_seqs) {
      last_stop_ = AdmissionStop::kMaxNumSeqs;
      break;
    }
    SimRequest* req = waiting_[w];
    PrefixHit hit;
    bool loaded = false;
    if (req->load_done_ns >= 0) {
      if (now < req->load_done_ns) {
        ++w;
        continue;
      }
      offload_->FinishLoad(req->kv, req->loaded_tokens);
      req->load_done_ns = -1;
      req->load_ended = true;
    }
    if (req->load_ended) {
      loaded = true;
      hit.hit_tokens = req->loaded_tokens;
    } else {
      PREFIXSIM_CHECK(req->num_computed == 0);
      // Registered now rather than at arrival, so that a long waiting queue holds no KV state
      // (lookups and allocations do not depend on when a request was registered).
      if (!req->kv.valid()) req->kv = kv_->AddRequest(req->request.get());
      if (config_.enable_prefix_caching) hit = kv_->GetComputedBlocks(req->kv);
      req->shared_prefix_boundary = hit.shared_prefix_boundary;
      req->lookup_gpu_hit = hit.hit_tokens;
      if (offload_ != nullptr && config_.enable_prefix_caching) {
        const LoadStart load = TryStartLoad(req, hit, now);
        if (load == LoadStart::kStarted || load == LoadStart::kDeferred) {
          ++w;
          continue;
        }
        if (load == LoadStart::kNoRoom) {
          last_stop_ = AdmissionStop::kAllocationFailed;
          break;
        }
      }
    }
    const int64_t computed = hit.hit_tokens;
    PREFIXSIM_CHECK(computed >= 0 && computed < req->num_tokens);
    int64_t n = req->num_tokens - computed;
    if (config_.long_prefill_token_threshold > 0) {
      n = std::min(n, config_.long_prefill_token_threshold);
    }
    if (!config_.enable_chunked_prefill && n > budget) {
      last_stop_ = AdmissionStop::kTooBigUnchunked;
      break;
    }
    n = std::min(n, budget);
    n = MambaAlignedSplit(config_, *req, n, computed);
    if (n <= 0) {
      last_stop_ = AdmissionStop::kZeroTokens;
      break;
    }
    // vLLM's admission gate (scheduler_reserve_full_isl): blocks for the whole sequence, not just
    // this chunk, must fit (docs/semantics.md §11). A loaded request passed it at its lookup.
    if (!loaded && config_.reserve_full_isl && !kv_->FullSequenceFits(req->kv)) {
      last_stop_ = AdmissionStop::kAllocationFailed;
      break;
    }
    // The causes are read before AllocateSlots changes the cache, and kept only if it admits.
    MissAttribution miss = req->load_miss;
    const bool attribute = config_.enable_prefix_caching && kv::MissAttributionEnabled(*kv_);
    if (attribute && !loaded) miss = AttributeAdmission(req, hit);
    // A fresh prefill reserves the lookahead slots too (vLLM since PR #43733).
    const bool allocated =
        loaded ? kv_->AllocateSlots(req->kv, computed, n, 0, config_.num_lookahead_tokens)
               : kv_->AllocateSlots(req->kv, 0, n, computed, config_.num_lookahead_tokens);
    if (!allocated) {
      // A loaded request keeps its blocks and tries again next step.
      last_stop_ = AdmissionStop::kAllocationFailed;
      break;
    }
    req->load_ended = false;
    if (offload_ != nullptr && !loaded) offload_->ResetStores(req->kv);
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
    waiting_tokens_ -= req->num_tokens;
    running_.push_back(req);
    // Statistics only for admitted requests (newest vLLM, docs/semantics.md §11/§12).
    if (config_.enable_prefix_caching) {
      const bool was_preempted = req->num_preemptions > 0;
      RecordPrefixLookup(&counters_.prefix_cache, was_preempted, req->num_tokens, computed);
      if (attribute) {
        counters_.miss_causes.enabled = true;
        counters_.miss_causes.tiers = offload_ != nullptr;
        (was_preempted ? counters_.miss_causes.preempted : counters_.miss_causes.first).Add(miss);
      }
      if (was_preempted) {
        req->readmission_hit_tokens += computed;
        counters_.preempted_alignment_loss_tokens += hit.alignment_loss_tokens;
      } else {
        counters_.alignment_loss_tokens += hit.alignment_loss_tokens;
        counters_.lost_to_alignment_tokens += hit.lost_to_alignment_tokens;
        window_.Observe(req->num_tokens, computed);
        if (offload_ != nullptr) {
          req->gpu_hit_tokens = req->lookup_gpu_hit;
          counters_.gpu_hit_tokens += req->gpu_hit_tokens;
          for (int t = 0; t < kMaxOffloadTiers; ++t) {
            req->tier_hit_tokens[t] = loaded ? req->load_split[t] : 0;
            counters_.tier_hit_tokens[t] += req->tier_hit_tokens[t];
          }
        }
      }
    }
    if (req->first_hit_tokens < 0) {
      req->first_hit_tokens = computed;
      req->first_alignment_loss = hit.alignment_loss_tokens;
      req->first_lost_to_alignment = hit.lost_to_alignment_tokens;
      req->first_miss = miss;
    }
    req->num_computed = computed;
    batch->push_back({req, n, computed + n, 0});
    budget -= n;
  }
}

// vLLM's get_num_new_matched_tokens and the waiting path's allocation for an asynchronous load:
// the tiers' hit beyond the GPU hit; blocks for both (the admission gate first); the load.
Scheduler::LoadStart Scheduler::TryStartLoad(SimRequest* req, const PrefixHit& hit, int64_t now) {
  const kv::OffloadingConnector::Match m =
      offload_->Lookup(req->kv, req->num_tokens, hit.hit_tokens, now);
  if (m.defer) return LoadStart::kDeferred;
  if (m.tokens == 0) return LoadStart::kNone;
  if (config_.reserve_full_isl && !kv_->FullSequenceFits(req->kv)) return LoadStart::kNoRoom;
  // A hit that reaches the end of the sequence leaves its last token to recompute.
  const int64_t loaded_tokens = std::min(hit.hit_tokens + m.tokens, req->num_tokens - 1);
  if (kv::MissAttributionEnabled(*kv_)) {
    // The causes count the tiers' tokens as hit (the hit rate does).
    PrefixHit whole = hit;
    whole.hit_tokens = loaded_tokens;
    req->load_miss = AttributeAdmission(req, whole);
  }
  int64_t done = 0;
  if (!offload_->StartLoad(req->kv, hit.hit_tokens, m, config_.num_lookahead_tokens, now, &done,
                           req->load_split)) {
    return LoadStart::kNoRoom;
  }
  req->load_done_ns = done;
  req->loaded_tokens = loaded_tokens;
  if (req->loaded_tokens < hit.hit_tokens + m.tokens) {
    // The recomputed token is the tier's loss; charge it to the last tier in the split.
    for (int t = kMaxOffloadTiers - 1; t >= 0; --t) {
      if (req->load_split[t] > 0) {
        req->load_split[t] -= 1;
        break;
      }
    }
  }
  return LoadStart::kStarted;
}

// The causes of an admission whose whole hit (the GPU's, then any tier's) is `hit`; with tiers,
// its evicted tokens split by whether a tier had stored them, from the request's GPU hit.
MissAttribution Scheduler::AttributeAdmission(SimRequest* req, const PrefixHit& hit) {
  if (offload_ == nullptr) return kv::AttributeMiss(*kv_, req->kv, hit, req->sighting);
  return kv::AttributeMiss(*kv_, req->kv, hit, req->sighting, [&] {
    return offload_->StoredEnd(req->kv, req->num_tokens, req->lookup_gpu_hit);
  });
}

void Scheduler::RemoveFinished() {
  running_.erase(std::remove_if(running_.begin(), running_.end(),
                                [](const SimRequest* r) { return r->finished; }),
                 running_.end());
}

SimRequest* Scheduler::PopWaitingFront() {
  PREFIXSIM_CHECK(!waiting_.empty());
  SimRequest* req = waiting_.front();
  waiting_.pop_front();
  waiting_tokens_ -= req->num_tokens;
  return req;
}

}  // namespace prefixsim
