#include "sim/engine/simulator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "prefixsim/status.h"

namespace prefixsim {

absl::StatusOr<ReplayResult> Replay(const KvPlan& plan, const ModelSpec& model,
                                    const EngineConfig& engine, TraceReader& trace,
                                    const ReplayOptions& options) {
  PREFIXSIM_ASSIGN_OR_RETURN(
      std::unique_ptr<Simulator> sim,
      Simulator::Create(plan, model, engine, options, options.cost_active_params));
  return sim->Run(trace);
}

Simulator::Simulator(const KvPlan& plan, const EngineConfig& engine, const ReplayOptions& options)
    : plan_(plan),
      engine_(engine),
      options_(options),
      sched_config_(SchedulerConfig::From(plan, engine)),
      rng_(options.seed) {
  sched_config_.hit_rate_window_requests = options.hit_rate_window_requests;
}

absl::StatusOr<std::unique_ptr<Simulator>> Simulator::Create(const KvPlan& plan,
                                                             const ModelSpec& model,
                                                             const EngineConfig& engine,
                                                             const ReplayOptions& options,
                                                             double cost_active_params) {
  if (plan.num_blocks < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the KV plan has ", plan.num_blocks, " blocks; the engine needs at least 2 (null + 1)"));
  }
  if (engine.max_num_batched_tokens <= 0 || engine.max_num_seqs <= 0 || engine.max_model_len <= 1) {
    return absl::InvalidArgumentError(
        "max_num_batched_tokens and max_num_seqs must be > 0, max_model_len > 1");
  }
  std::unique_ptr<Simulator> sim(new Simulator(plan, engine, options));
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
  ctx.active_params = cost_active_params;
  PREFIXSIM_ASSIGN_OR_RETURN(sim->cost_, NewCostModel(engine.cost_model, ctx));
  KvCacheOptions kv_options;
  kv_options.check_invariants = options.check_invariants;
  kv_options.max_model_len = engine.max_model_len;
  sim->kv_ = std::make_unique<KvCacheManager>(sim->plan_, kv_options);
  sim->scheduler_ = std::make_unique<Scheduler>(sim->sched_config_, sim->kv_.get());
  sim->result_.policy = plan.policy;
  sim->result_.plan = plan;
  if (sim->num_spec_tokens_ > 0) {
    sim->result_.spec_decode.accepted_per_position.assign(sim->num_spec_tokens_, 0);
  }
  return sim;
}

absl::Status Simulator::ReadNext(TraceReader& trace) {
  auto req = std::make_unique<Request>();
  PREFIXSIM_ASSIGN_OR_RETURN(bool more, trace.Next(req.get()));
  if (!more) {
    pending_.reset();
    return absl::OkStatus();
  }
  // The event kernel never goes back in time: an arrival earlier than the previous one (or
  // before 0) is clamped and counted.
  if (req->arrival_ns < last_arrival_ns_) {
    req->arrival_ns = last_arrival_ns_;
    result_.out_of_order_arrivals += 1;
  }
  last_arrival_ns_ = req->arrival_ns;
  pending_ = std::move(req);
  return absl::OkStatus();
}

absl::StatusOr<ReplayResult> Simulator::Run(TraceReader& trace) {
  wall_start_ = std::chrono::steady_clock::now();
  next_progress_ = options_.progress_interval_requests;
  PREFIXSIM_RETURN_IF_ERROR(ReadNext(trace));
  if (pending_) events_.Push(pending_->arrival_ns, EventType::kArrival);
  while (!events_.empty()) {
    const auto ev = events_.Pop();
    switch (ev.payload) {
      case EventType::kArrival:
        PREFIXSIM_RETURN_IF_ERROR(HandleArrivals(trace));
        break;
      case EventType::kStepDone:
        FinishStep();
        busy_ = false;
        PREFIXSIM_RETURN_IF_ERROR(StartStep());
        break;
    }
  }
  PREFIXSIM_CHECK(scheduler_->num_running() == 0 && scheduler_->num_waiting() == 0);
  ReportProgress(true, /*done=*/true);
  return Collect();
}

absl::Status Simulator::HandleArrivals(TraceReader& trace) {
  const int64_t now = events_.now();
  // All requests that arrive at this instant join the waiting queue before the engine looks.
  while (pending_ && pending_->arrival_ns <= now) {
    Admit(std::move(pending_));
    PREFIXSIM_RETURN_IF_ERROR(ReadNext(trace));
  }
  if (pending_) events_.Push(pending_->arrival_ns, EventType::kArrival);
  ReportProgress(false);
  if (!busy_) return StartStep();
  return absl::OkStatus();
}

void Simulator::Skip(const Request& request, const char* reason) {
  if (options_.record_requests) {
    RequestRecord rec;
    rec.id = request.id;
    rec.arrival_ns = request.arrival_ns;
    rec.prompt_tokens = request.prompt_tokens;
    rec.skipped = reason;
    result_.per_request.push_back(std::move(rec));
  }
}

void Simulator::Admit(std::unique_ptr<Request> request) {
  result_.requests += 1;
  if (first_arrival_ns_ < 0) first_arrival_ns_ = request->arrival_ns;
  // vLLM rejects an empty prompt or one longer than max_model_len at input processing; a prompt
  // of exactly max_model_len leaves no room for an output token, so it is rejected here too.
  if (request->prompt_tokens <= 0) {
    result_.skipped_empty_prompt += 1;
    Skip(*request, "empty_prompt");
    return;
  }
  if (request->prompt_tokens >= engine_.max_model_len) {
    result_.skipped_prompt_too_long += 1;
    Skip(*request, "prompt_too_long");
    return;
  }
  auto sim = std::make_unique<SimRequest>();
  sim->num_tokens = request->prompt_tokens;
  // At least one output token (vLLM's max_tokens >= 1); the sequence stops at max_model_len
  // (FINISHED_LENGTH_CAPPED).
  sim->max_outputs = std::max<int64_t>(
      1, std::min(request->output_tokens, engine_.max_model_len - request->prompt_tokens));
  sim->request = std::move(request);
  if (options_.record_requests) {
    sim->record_index = static_cast<int64_t>(result_.per_request.size());
    RequestRecord rec;
    rec.id = sim->request->id;
    rec.arrival_ns = sim->request->arrival_ns;
    rec.prompt_tokens = sim->request->prompt_tokens;
    result_.per_request.push_back(std::move(rec));
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
  kv_->AddRequest(raw->request.get());
  scheduler_->AddWaiting(raw);
}

absl::Status Simulator::StartStep() {
  PREFIXSIM_CHECK(!busy_);
  for (;;) {
    scheduler_->Schedule(&batch_);
    if (!batch_.empty()) break;
    if (scheduler_->num_waiting() == 0 && scheduler_->num_running() == 0) return absl::OkStatus();
    const AdmissionStop stop = scheduler_->last_admission_stop();
    // A step that only preempted admits nothing (vLLM); the next schedule can admit. It takes no
    // simulated time: no tokens run.
    if (stop == AdmissionStop::kPreempted) continue;
    if (scheduler_->num_running() == 0 &&
        (stop == AdmissionStop::kAllocationFailed || stop == AdmissionStop::kTooBigUnchunked)) {
      // With nothing running every block is free or evictable: this request can never be
      // served (vLLM would wait forever). Drop it and count it.
      SimRequest* req = scheduler_->PopWaitingFront();
      kv_->Free(req->id());
      kv_->RemoveRequest(req->id());
      result_.skipped_does_not_fit += 1;
      if (req->record_index >= 0) {
        result_.per_request[req->record_index].skipped = "does_not_fit";
        result_.per_request[req->record_index].preemptions = req->num_preemptions;
      }
      free_slots_.push_back(req->slot);
      live_[req->slot].reset();
      continue;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("the engine cannot make progress: ", scheduler_->num_running(),
                     " running and ", scheduler_->num_waiting(),
                     " waiting requests but an empty batch (is max_num_batched_tokens = ",
                     engine_.max_num_batched_tokens, " below the mamba block size ",
                     sched_config_.mamba_align_block_size, "?)"));
  }
  work_.clear();
  for (const ScheduledSeq& s : batch_) {
    work_.push_back({s.num_new_tokens, s.req->num_computed + s.num_new_tokens});
  }
  const int64_t dt = cost_->StepTimeNs(work_);
  PREFIXSIM_CHECK(dt > 0);
  result_.num_steps += 1;
  if ((result_.num_steps & 1023) == 0) ReportProgress(true);
  usage_sum_ += kv_->usage();
  result_.max_running =
      std::max<int64_t>(result_.max_running, static_cast<int64_t>(scheduler_->num_running()));
  busy_ = true;
  events_.Push(events_.now() + dt, EventType::kStepDone);
  return absl::OkStatus();
}

int Simulator::SampleAccepted(SimRequest* req, int num_drafts) {
  const std::vector<int32_t>& lengths = req->request->accepted_lengths;
  if (options_.use_trace_accepted_lengths && req->accepted_cursor < lengths.size()) {
    const int a = lengths[req->accepted_cursor++];
    return std::clamp(a, 0, num_drafts);
  }
  const int a = acceptance_->Sample(num_drafts, rng_);
  PREFIXSIM_CHECK(a >= 0 && a <= num_drafts);
  return a;
}

void Simulator::FinishStep() {
  const int64_t now = events_.now();
  std::vector<SimRequest*>& done = done_;
  done.clear();
  for (const ScheduledSeq& s : batch_) {
    SimRequest* r = s.req;
    r->num_computed += s.num_new_tokens;
    result_.computed_tokens += s.num_new_tokens;
    if (r->num_computed < r->num_tokens) continue;  // a prefill chunk; no token sampled yet
    // The step reached the end of the sequence: it samples a token and verifies the drafts.
    const int d = s.num_drafts;
    PREFIXSIM_CHECK(r->num_computed == r->num_tokens + d);
    int accepted = 0;
    if (d > 0) {
      accepted = SampleAccepted(r, d);
      SpecDecodeStats& sd = result_.spec_decode;
      sd.num_drafts += 1;
      sd.draft_tokens += d;
      sd.accepted_tokens += accepted;
      for (int p = 0; p < accepted; ++p) sd.accepted_per_position[p] += 1;
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
      kv_->SetNumTokens(r->id(), r->num_tokens);
      r->num_drafts = num_spec_tokens_;  // the drafter proposes k drafts for the next step
    }
  }
  if (done.empty()) return;
  scheduler_->RemoveFinished();
  for (SimRequest* r : done) Finish(r);
}

void Simulator::Finish(SimRequest* r) {
  result_.unpublished_alignment_tokens +=
      kv_->UnpublishedAlignmentTokens(std::min(r->num_computed, r->num_tokens));
  kv_->Free(r->id());
  kv_->RemoveRequest(r->id());
  result_.finished_requests += 1;
  result_.prompt_tokens += r->request->prompt_tokens;
  result_.output_tokens += r->num_outputs;
  const int64_t arrival = r->request->arrival_ns;
  ttft_ns_.push_back(r->first_token_ns - arrival);
  e2e_ns_.push_back(r->finish_ns - arrival);
  if (r->num_outputs > 1) {
    tpot_ns_.push_back((r->finish_ns - r->first_token_ns) / (r->num_outputs - 1));
  }
  last_finish_ns_ = std::max(last_finish_ns_, r->finish_ns);
  if (r->record_index >= 0) {
    RequestRecord& rec = result_.per_request[r->record_index];
    rec.output_tokens = r->num_outputs;
    rec.hit_tokens = std::max<int64_t>(r->first_hit_tokens, 0);
    rec.alignment_loss_tokens = r->first_alignment_loss;
    rec.lost_to_alignment_tokens = r->first_lost_to_alignment;
    rec.first_token_ns = r->first_token_ns;
    rec.finish_ns = r->finish_ns;
    rec.preemptions = r->num_preemptions;
  }
  free_slots_.push_back(r->slot);
  live_[r->slot].reset();
}

void Simulator::ReportProgress(bool force, bool done) {
  if (!options_.progress) return;
  if (!force && result_.requests < next_progress_) return;
  next_progress_ = result_.requests + std::max<int64_t>(1, options_.progress_interval_requests);
  ReplayProgress p;
  p.requests_read = result_.requests;
  p.requests_finished = result_.finished_requests + result_.skipped_prompt_too_long +
                        result_.skipped_does_not_fit + result_.skipped_empty_prompt;
  p.sim_time_ns = events_.now();
  p.done = done;
  options_.progress(p);
}

ReplayResult Simulator::Collect() {
  ReplayResult& r = result_;
  const SchedulerCounters& c = scheduler_->counters();
  r.prefix_cache = c.prefix_cache;
  r.recent_hit_rate = scheduler_->recent_hit_rate();
  r.recent_window_requests = options_.hit_rate_window_requests;
  r.alignment_loss_tokens = c.alignment_loss_tokens;
  r.preempted_alignment_loss_tokens = c.preempted_alignment_loss_tokens;
  r.lost_to_alignment_tokens = c.lost_to_alignment_tokens;
  r.preemptions = c.preemptions;
  r.evicted_blocks = kv_->counters().evicted_blocks;
  r.cached_blocks = kv_->counters().cached_blocks;
  r.mean_kv_usage = r.num_steps > 0 ? usage_sum_ / static_cast<double>(r.num_steps) : 0.0;
  r.ttft = SummarizeLatencyNs(ttft_ns_);
  r.tpot = SummarizeLatencyNs(tpot_ns_);
  r.e2e = SummarizeLatencyNs(e2e_ns_);
  r.sim_time_ns =
      first_arrival_ns_ >= 0 ? std::max<int64_t>(last_finish_ns_ - first_arrival_ns_, 0) : 0;
  if (r.sim_time_ns > 0) {
    const double s = static_cast<double>(r.sim_time_ns) / 1e9;
    r.requests_per_s = static_cast<double>(r.finished_requests) / s;
    r.prompt_tokens_per_s = static_cast<double>(r.prompt_tokens) / s;
    r.output_tokens_per_s = static_cast<double>(r.output_tokens) / s;
  }
  r.wall_time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  return std::move(result_);
}

}  // namespace prefixsim
