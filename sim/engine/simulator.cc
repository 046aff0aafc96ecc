#include "sim/engine/simulator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/kv/fast_path.h"
#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

// Replica 0 draws from the seed itself (a one-replica fleet is the plain engine); the others
// from independent streams derived from it.
uint64_t ReplicaSeed(uint64_t seed, int replica) {
  if (replica == 0) return seed;
  uint64_t x = seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(replica);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// What a request got before it ended, however it ended: its first admission's lookup (what the
// JSON's prefix_cache and miss causes count, so a request admitted and later dropped keeps it),
// outputs and re-admissions.
void RecordProgress(const SimRequest& req, RequestRecord* rec) {
  rec->output_tokens = req.num_outputs;
  rec->first_token_ns = req.first_token_ns;
  rec->preemptions = req.num_preemptions;
  rec->readmission_hit_tokens = req.readmission_hit_tokens;
  if (req.first_hit_tokens >= 0) {
    rec->hit_tokens = req.first_hit_tokens;
    rec->alignment_loss_tokens = req.first_alignment_loss;
    rec->lost_to_alignment_tokens = req.first_lost_to_alignment;
    rec->miss = req.first_miss;
    rec->gpu_hit_tokens = req.gpu_hit_tokens;
    std::copy(std::begin(req.tier_hit_tokens), std::end(req.tier_hit_tokens),
              std::begin(rec->tier_hit_tokens));
  }
}

}  // namespace

Simulator::Simulator(const KvPlan& plan, const EngineConfig& engine, const ReplayOptions& options,
                     int replica, RequestLog* records)
    : plan_(plan),
      engine_(engine),
      options_(options),
      replica_(replica),
      records_(records),
      sched_config_(SchedulerConfig::From(plan, engine)),
      rng_(ReplicaSeed(options.seed, replica)) {
  sched_config_.hit_rate_window_requests = options.hit_rate_window_requests;
  max_steps_without_finish_ = options.max_steps_without_finish >= 0
                                  ? options.max_steps_without_finish
                                  : 2 * engine.max_model_len + 10000;
}

absl::Status Simulator::ThrashingError() const {
  const int64_t preemptions = scheduler_->counters().preemptions - preemptions_at_last_finish_;
  const int64_t steps = totals_.counters.num_steps - steps_at_last_finish_;
  const int64_t max_preemptions = options_.max_preemptions_without_finish;
  return absl::ResourceExhaustedError(absl::StrCat(
      "the engine is thrashing",
      engine_.fleet.replicas > 1 || engine_.fleet.auto_replicas
          ? absl::StrCat(" (replica ", replica_, ")")
          : "",
      ": ", preemptions, " preemptions and ", steps, " steps since a request last finished (",
      totals_.counters.finished_requests, " finished so far; ", scheduler_->num_running(),
      " running, ", scheduler_->num_waiting(), " waiting; ", kv_->num_usable_blocks(),
      " KV blocks). The KV cache cannot hold the requests it admits, so they evict each other "
      "for ever. Give it more memory (`kv_cache_bytes` or `num_gpu_blocks`), admit fewer "
      "requests at once (`max_num_seqs`), or spread the load (`replicas=auto`). The limits: "
      "`max_preemptions_without_finish` (now ",
      max_preemptions, ") and `max_steps_without_finish` (now ", max_steps_without_finish_,
      "); 0 turns a check off."));
}

absl::StatusOr<std::unique_ptr<Simulator>> Simulator::Create(
    const KvPlan& plan, const ModelSpec& model, const EngineConfig& engine,
    const ReplayOptions& options, const ReplayTuning& tuning, int replica, RequestLog* records,
    const kv::OffloadingConnector::SharedTiers* shared_tiers) {
  if (plan.num_blocks < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the KV plan has ", plan.num_blocks, " blocks; the engine needs at least 2 (null + 1)"));
  }
  if (engine.max_num_batched_tokens <= 0 || engine.max_num_seqs <= 0 || engine.max_model_len <= 1) {
    return absl::InvalidArgumentError(
        "max_num_batched_tokens and max_num_seqs must be > 0, max_model_len > 1");
  }
  std::unique_ptr<Simulator> sim(new Simulator(plan, engine, options, replica, records));
  const SpeculativeConfig& spec = engine.speculative;
  if (spec.enabled && spec.num_speculative_tokens > 0) {
    sim->num_spec_tokens_ = spec.num_speculative_tokens;
    PREFIXSIM_ASSIGN_OR_RETURN(sim->acceptance_,
                               NewAcceptanceModel(spec.acceptance, spec.num_speculative_tokens));
  }
  CostModelContext ctx;
  ctx.plan = &sim->plan_;
  ctx.model = &model;
  ctx.engine = &sim->engine_;
  ctx.active_params = options.cost_active_params;
  PREFIXSIM_ASSIGN_OR_RETURN(sim->cost_, NewCostModel(engine.cost_model, ctx));
  KvCacheOptions kv_options;
  kv_options.check_invariants = options.check_invariants;
  kv_options.max_model_len = engine.max_model_len;
  kv_options.max_num_batched_tokens = engine.max_num_batched_tokens;
  sim->kv_ = std::make_unique<KvCacheManager>(sim->plan_, kv_options);
  kv::SetFastPath(*sim->kv_, tuning.kv_fast_path);
  const int64_t max_record_blocks =
      options.miss_record_bytes > 0
          ? std::max<int64_t>(2, options.miss_record_bytes / kv::kRecordBytesPerBlock)
          : 0;
  if (options.attribute_misses) kv::EnableMissAttribution(*sim->kv_, max_record_blocks);
  if (options.kv_event_sink) {
    sim->event_sink_ = options.kv_event_sink(replica);
    sim->kv_->SetKvEventSink(sim->event_sink_);
  }
  sim->scheduler_ = std::make_unique<Scheduler>(sim->sched_config_, sim->kv_.get());
  if (engine.kv_offload.enabled() && plan.enable_prefix_caching) {
    sim->offload_ = std::make_unique<kv::OffloadingConnector>(
        sim->plan_, sim->engine_, sim->kv_.get(), shared_tiers, /*reports_shared=*/replica == 0);
    sim->scheduler_->SetOffloadingConnector(sim->offload_.get());
    // Each tier's record of its evictions is bounded like the replica's record of its blocks.
    if (kv::MissAttributionEnabled(*sim->kv_)) {
      sim->offload_->EnableMissAttribution(max_record_blocks);
    }
  }
  if (sim->num_spec_tokens_ > 0) sim->steps_by_accepted_.assign(sim->num_spec_tokens_ + 1, 0);
  return sim;
}

void Simulator::FlushEndedRecords() {
  for (int64_t index : ended_records_) records_->Final(index);
  ended_records_.clear();
}

void Simulator::Skip(const Request& request, const char* reason) {
  if (records_ != nullptr) {
    RequestRecord rec;
    rec.id = request.id;
    rec.arrival_ns = request.arrival_ns;
    rec.prompt_tokens = request.prompt_tokens;
    rec.replica = replica_;
    rec.skipped = reason;
    records_->Final(records_->Add(std::move(rec)));
  }
}

void Simulator::Admit(std::unique_ptr<Request> request, int64_t /*now*/,
                      const kv::ArrivalSighting& sighting) {
  ReplayResult& result = totals_.counters;
  result.requests += 1;
  // vLLM rejects an empty prompt or one longer than max_model_len at input processing; a prompt
  // of exactly max_model_len leaves no room for an output token, so it is rejected here too.
  if (request->prompt_tokens <= 0) {
    result.skipped_empty_prompt += 1;
    Skip(*request, "empty_prompt");
    return;
  }
  if (request->prompt_tokens >= engine_.max_model_len) {
    result.skipped_prompt_too_long += 1;
    Skip(*request, "prompt_too_long");
    return;
  }
  auto sim = std::make_unique<SimRequest>();
  sim->num_tokens = request->prompt_tokens;
  sim->prompt_tokens = request->prompt_tokens;
  sim->sighting = sighting;
  if (options_.use_trace_accepted_lengths) {
    PREFIXSIM_CHECK(request->accepted_lengths.size() < static_cast<size_t>(INT32_MAX));
    sim->num_trace_accepted = static_cast<int32_t>(request->accepted_lengths.size());
  }
  // At least one output token (vLLM's max_tokens >= 1); the sequence stops at max_model_len
  // (FINISHED_LENGTH_CAPPED).
  sim->max_outputs = std::max<int64_t>(
      1, std::min(request->output_tokens, engine_.max_model_len - request->prompt_tokens));
  sim->request = std::move(request);
  if (records_ != nullptr) {
    RequestRecord rec;
    rec.id = sim->request->id;
    rec.arrival_ns = sim->request->arrival_ns;
    rec.prompt_tokens = sim->request->prompt_tokens;
    rec.replica = replica_;
    rec.routing_regret_tokens = sighting.routing_regret_tokens;
    sim->record_index = records_->Add(std::move(rec));
  }
  if (free_slots_.empty()) {
    sim->slot = live_.size();
    live_.emplace_back();
  } else {
    sim->slot = free_slots_.back();
    free_slots_.pop_back();
  }
  SimRequest* raw = sim.get();
  live_[raw->slot] = std::move(sim);
  scheduler_->AddWaiting(raw);
}

absl::StatusOr<int64_t> Simulator::StartStep(int64_t now) {
  PREFIXSIM_CHECK(!busy_);
  ReplayResult& result = totals_.counters;
  for (;;) {
    scheduler_->Schedule(&batch_, now);
    if (ThrashLimitReached()) return ThrashingError();
    if (!batch_.empty()) break;
    if (scheduler_->num_waiting() == 0 && scheduler_->num_running() == 0) return 0;
    // Only tier loads are in flight: the engine idles until the first of them ends.
    if (const int64_t load_end = NextLoadEnd(now); load_end > now) {
      busy_ = true;
      return load_end - now;
    }
    const AdmissionStop stop = scheduler_->last_admission_stop();
    // A step that only preempted admits nothing (vLLM); the next schedule can admit. It takes no
    // simulated time: no tokens run.
    if (stop == AdmissionStop::kPreempted) continue;
    if (scheduler_->num_running() == 0 &&
        (stop == AdmissionStop::kAllocationFailed || stop == AdmissionStop::kTooBigUnchunked)) {
      // With nothing running every block is free or evictable: this request can never be
      // served (vLLM would wait forever). Drop it and count it.
      // Both stops come after Schedule registered the front request with the KV manager.
      SimRequest* req = scheduler_->PopWaitingFront();
      PREFIXSIM_CHECK(req->kv.valid());
      kv_->Free(req->kv);
      kv_->RemoveRequest(req->id());
      result.skipped_does_not_fit += 1;
      if (req->record_index >= 0) {
        RequestRecord& rec = records_->at(req->record_index);
        RecordProgress(*req, &rec);
        rec.skipped = "does_not_fit";
        ended_records_.push_back(req->record_index);
      }
      free_slots_.push_back(req->slot);
      live_[req->slot].reset();
      continue;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("the engine cannot make progress: ", scheduler_->num_running(),
                     " running and ", scheduler_->num_waiting(),
                     " waiting requests but an empty batch (max_num_batched_tokens = ",
                     engine_.max_num_batched_tokens, ")"));
  }
  work_.clear();
  for (const ScheduledSeq& s : batch_) {
    work_.push_back({s.num_new_tokens, s.context_tokens});
  }
  const int64_t dt = cost_->StepTimeNs(work_);
  PREFIXSIM_CHECK(dt > 0);
  if (offload_ != nullptr) {
    // vLLM's connector offers the blocks the step fills for storing; the writes start at its end.
    for (const ScheduledSeq& s : batch_) {
      const SimRequest& r = *s.req;
      offload_->StoreAfterStep(r.kv, std::min(s.context_tokens, r.num_tokens), r.prompt_tokens,
                               now + dt);
    }
  }
  result.num_steps += 1;
  result.step_time_ns += dt;
  result.kernel_time_ns = cost_->kernel_ns();
  totals_.usage_sum += kv_->usage();
  result.max_running =
      std::max<int64_t>(result.max_running, static_cast<int64_t>(scheduler_->num_running()));
  busy_ = true;
  if (event_sink_ != nullptr) event_sink_->OnStepScheduled(now);
  return dt;
}

int Simulator::SampleAccepted(SimRequest* req, int num_drafts) {
  if (req->accepted_cursor < req->num_trace_accepted) {  // the Request is a cold line: test first
    const int a = req->request->accepted_lengths[req->accepted_cursor++];
    return std::clamp(a, 0, num_drafts);
  }
  const int a = acceptance_->Sample(num_drafts, rng_);
  PREFIXSIM_CHECK(a >= 0 && a <= num_drafts);
  return a;
}

void Simulator::FinishStep(int64_t now) {
  PREFIXSIM_CHECK(busy_);
  busy_ = false;
  if (options_.check_invariants_every > 0 &&
      totals_.counters.num_steps % options_.check_invariants_every == 0) {
    kv_->CheckInvariants();  // aborts with the broken invariant
  }
  ReplayResult& result = totals_.counters;
  std::vector<SimRequest*>& done = done_;
  done.clear();
  for (size_t i = 0; i < batch_.size(); ++i) {
    const ScheduledSeq& s = batch_[i];
    SimRequest* r = s.req;
    r->num_computed += s.num_new_tokens;
    result.computed_tokens += s.num_new_tokens;
    if (r->num_computed < r->num_tokens) continue;  // a prefill chunk; no token sampled yet
    // The step reached the end of the sequence: it samples a token and verifies the drafts.
    const int d = s.num_drafts;
    PREFIXSIM_CHECK(r->num_computed == r->num_tokens + d);
    int accepted = 0;
    if (d > 0) {
      accepted = SampleAccepted(r, d);
      SpecDecodeStats& sd = result.spec_decode;
      sd.num_drafts += 1;
      sd.draft_tokens += d;
      sd.accepted_tokens += accepted;
      steps_by_accepted_[accepted] += 1;
    }
    r->num_computed -= d - accepted;  // rejected drafts are rolled back (their slots stay)
    const int64_t generated = std::min<int64_t>(accepted + 1, r->max_outputs - r->num_outputs);
    r->num_outputs += generated;
    r->num_tokens += generated;
    if (r->first_token_ns < 0) r->first_token_ns = now;
    if (r->num_outputs >= r->max_outputs) {
      r->finish_ns = now;
      r->finished = true;
      done.push_back(r);
    } else {
      kv_->SetNumTokens(r->kv, r->num_tokens);
      r->num_drafts = num_spec_tokens_;  // the drafter proposes k drafts for the next step
    }
  }
  if (done.empty()) return;
  scheduler_->RemoveFinished();
  for (SimRequest* r : done) Finish(r);
}

void Simulator::Finish(SimRequest* r) {
  ReplayResult& result = totals_.counters;
  result.unpublished_alignment_tokens +=
      kv_->UnpublishedAlignmentTokens(std::min(r->num_computed, r->num_tokens));
  kv_->Free(r->kv);
  kv_->RemoveRequest(r->id());
  result.finished_requests += 1;
  preemptions_at_last_finish_ = scheduler_->counters().preemptions;
  steps_at_last_finish_ = result.num_steps;
  result.prompt_tokens += r->request->prompt_tokens;
  result.output_tokens += r->num_outputs;
  result.lost_to_alignment_requests[r->first_lost_to_alignment] += 1;
  const int64_t arrival = r->request->arrival_ns;
  totals_.ttft.Add(r->first_token_ns - arrival);
  totals_.e2e.Add(r->finish_ns - arrival);
  if (r->num_outputs > 1) {
    totals_.tpot.Add((r->finish_ns - r->first_token_ns) / (r->num_outputs - 1));
  }
  totals_.last_finish_ns = std::max(totals_.last_finish_ns, r->finish_ns);
  if (r->record_index >= 0) {
    RequestRecord& rec = records_->at(r->record_index);
    RecordProgress(*r, &rec);
    rec.finish_ns = r->finish_ns;
    ended_records_.push_back(r->record_index);
  }
  free_slots_.push_back(r->slot);
  live_[r->slot].reset();
}

int64_t Simulator::NextLoadEnd(int64_t now) const {
  if (offload_ == nullptr || !offload_->loads_in_flight()) return -1;
  int64_t first = -1;
  for (const SimRequest* r : scheduler_->waiting()) {
    if (r->load_done_ns > now && (first < 0 || r->load_done_ns < first)) first = r->load_done_ns;
  }
  return first;
}

int64_t Simulator::requests_done() const {
  const ReplayResult& r = totals_.counters;
  return r.finished_requests + r.skipped_prompt_too_long + r.skipped_does_not_fit +
         r.skipped_empty_prompt;
}

int64_t Simulator::OutstandingTokens() const {
  // The waiting queue's share is kept by the scheduler (O(1)); the running requests, at most
  // max_num_seqs, are summed here.
  int64_t tokens = scheduler_->waiting_tokens();
  for (const SimRequest* r : scheduler_->running()) {
    tokens += r->num_computed < r->num_tokens ? r->num_tokens - r->num_computed : r->num_tokens;
  }
  if (options_.check_invariants) {
    int64_t waiting = 0;
    for (const SimRequest* r : scheduler_->waiting()) waiting += r->num_tokens - r->num_computed;
    PREFIXSIM_CHECK(waiting == scheduler_->waiting_tokens());
  }
  return tokens;
}

void Simulator::Interrupt() {
  if (interrupted_) return;
  interrupted_ = true;
  for (std::unique_ptr<SimRequest>& req : live_) {
    if (req == nullptr) continue;
    totals_.counters.interrupted_requests += 1;
    if (req->record_index >= 0) {
      RequestRecord& rec = records_->at(req->record_index);
      RecordProgress(*req, &rec);
      rec.skipped = "interrupted";
      records_->Final(req->record_index);
    }
  }
  scheduler_->Clear();
  busy_ = false;
}

ReplicaTotals Simulator::TakeTotals() {
  PREFIXSIM_CHECK(idle());
  ReplayResult& r = totals_.counters;
  const SchedulerCounters& c = scheduler_->counters();
  r.prefix_cache = c.prefix_cache;
  r.alignment_loss_tokens = c.alignment_loss_tokens;
  r.preempted_alignment_loss_tokens = c.preempted_alignment_loss_tokens;
  r.lost_to_alignment_tokens = c.lost_to_alignment_tokens;
  r.miss_causes = c.miss_causes;
  r.miss_causes.forgotten_blocks = kv::ForgottenComputedBlocks(*kv_);
  if (offload_ != nullptr) r.miss_causes.forgotten_tier_keys = offload_->ForgottenTierKeys();
  r.preemptions = c.preemptions;
  r.evicted_blocks = kv_->counters().evicted_blocks;
  if (offload_ != nullptr) {
    r.offload = offload_->Stats();
    r.offload.gpu_hit_tokens = c.gpu_hit_tokens;
    for (size_t t = 0; t < r.offload.tiers.size(); ++t) {
      r.offload.tiers[t].hit_tokens = c.tier_hit_tokens[t];
    }
  }
  r.cached_blocks = kv_->counters().cached_blocks;
  // Position p was accepted by every verification that accepted more than p drafts.
  std::vector<int64_t>& per_position = r.spec_decode.accepted_per_position;
  per_position.assign(num_spec_tokens_, 0);
  int64_t accepted_beyond = 0;
  for (int p = num_spec_tokens_ - 1; p >= 0; --p) {
    accepted_beyond += steps_by_accepted_[p + 1];
    per_position[p] = accepted_beyond;
  }
  totals_.window_queries = scheduler_->window_queries();
  totals_.window_hits = scheduler_->window_hits();
  return std::move(totals_);
}

}  // namespace prefixsim
