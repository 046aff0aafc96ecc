// The native half of the Python module `prefixsim` (docs/python.md): `prefixsim._core`, which runs
// the library the way the CLI does (sim/run: the same model and engine loading, overrides, trace
// read-ahead and replay; the public reports) and hands results to the Python half
// (python/prefixsim/) as JSON text and NumPy columns. Keyword handling, validation messages,
// pandas frames and Ctrl-C policy live in Python; this file converts, runs without the GIL, and
// maps library errors to Python exceptions.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "prefixsim/analyze.h"
#include "prefixsim/engine.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/policy.h"
#include "prefixsim/report.h"
#include "prefixsim/trace.h"
#include "sim/plan/plan_format.h"
#include "sim/report/report.h"
#include "sim/run/model_engine.h"
#include "sim/run/option_flags.h"
#include "sim/run/replay.h"
#include "sim/trace/gen/workload_generator.h"
#include "sim/trace/line_reader.h"
#include "sim/trace/trace_source.h"
#include "sim/util/atomic_file.h"
#include "sim/util/byte_size.h"
#include "sim/util/parallel_for.h"
#include "sim/util/status_macros.h"

namespace py = pybind11;

namespace prefixsim::python {
namespace {

// ---------------------------------------------------------------------------------------------
// Errors

// A library status as the exception a Python caller expects: bad input is ValueError, a missing
// file FileNotFoundError, a run that cannot go on (thrashing) RuntimeError. `field`, when given,
// names the argument the status is about ("`model`: ...").
[[noreturn]] void ThrowStatus(const absl::Status& status, std::string_view field = "") {
  // The library names its options' fields; the keywords are named like the CLI's flags.
  const std::string spelt = run::SpellAsKeywords(StdView(status.message()));
  const std::string message =
      field.empty() ? spelt : absl::StrCat("`", std::string(field), "`: ", spelt);
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      PyErr_SetString(PyExc_FileNotFoundError, message.c_str());
      throw py::error_already_set();
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      throw py::value_error(message);
    default:
      throw std::runtime_error(message);
  }
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value, std::string_view field = "") {
  if (!value.ok()) ThrowStatus(value.status(), field);
  return *std::move(value);
}

// ---------------------------------------------------------------------------------------------
// Inputs: the Python half passes validated plain values (dicts of ints, floats, strings, bools).

template <typename T>
std::optional<T> Get(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return std::nullopt;
  return d[key].cast<T>();
}

template <typename T>
void Set(const py::dict& d, const char* key, T& out) {
  if (auto v = Get<T>(d, key)) out = *v;
}

run::EngineOverrides ToOverrides(const py::dict& d) {
  run::EngineOverrides o;
  o.block_size = Get<int64_t>(d, "block_size");
  o.kv_cache_bytes = Get<int64_t>(d, "kv_cache_bytes");
  o.num_gpu_blocks = Get<int64_t>(d, "num_gpu_blocks");
  o.max_num_batched_tokens = Get<int64_t>(d, "max_num_batched_tokens");
  o.max_num_seqs = Get<int64_t>(d, "max_num_seqs");
  o.max_model_len = Get<int64_t>(d, "max_model_len");
  o.long_prefill_token_threshold = Get<int64_t>(d, "long_prefill_token_threshold");
  o.prefix_match_unit = Get<int64_t>(d, "prefix_match_unit");
  o.tensor_parallel_size = Get<int64_t>(d, "tensor_parallel_size");
  o.num_speculative_tokens = Get<int64_t>(d, "num_speculative_tokens");
  o.speculative_method = Get<std::string>(d, "speculative_method");
  o.kv_cache_dtype = Get<std::string>(d, "kv_cache_dtype");
  o.mamba_spec_boundary_states = Get<std::string>(d, "mamba_spec_boundary_states");
  o.enable_prefix_caching = Get<bool>(d, "enable_prefix_caching");
  o.enable_chunked_prefill = Get<bool>(d, "enable_chunked_prefill");
  o.disable_eagle_block_drop = Get<bool>(d, "disable_eagle_block_drop");
  o.scheduler_reserve_full_isl = Get<bool>(d, "scheduler_reserve_full_isl");
  o.prefix_cache_retention_interval = Get<std::string>(d, "prefix_cache_retention_interval");
  o.no_speculative = Get<bool>(d, "no_spec").value_or(false);
  o.replicas = Get<std::string>(d, "replicas");
  o.router = Get<std::string>(d, "router");
  o.overlap_weight = Get<double>(d, "overlap_weight");
  o.ttft_slo_ms = Get<double>(d, "ttft_slo_ms");
  o.router_view = Get<std::string>(d, "router_view");
  o.kv_event_delay_ms = Get<double>(d, "kv_event_delay_ms");
  o.kv_event_loss = Get<double>(d, "kv_event_loss");
  o.router_max_blocks = Get<int64_t>(d, "router_max_blocks");
  o.router_ttl_s = Get<double>(d, "router_ttl_s");
  o.router_cpu_tier_weight = Get<double>(d, "router_cpu_tier_weight");
  o.router_storage_tier_weight = Get<double>(d, "router_storage_tier_weight");
  o.kv_offloading_size = Get<double>(d, "kv_offloading_size");
  o.kv_offload_store_threshold = Get<int64_t>(d, "kv_offload_store_threshold");
  o.kv_offload_prompt_only = Get<bool>(d, "kv_offload_prompt_only");
  o.kv_offload_slot_sizing = Get<std::string>(d, "kv_offload_slot_sizing");
  o.kv_offload_load_gbps = Get<double>(d, "kv_offload_load_gbps");
  o.kv_offload_store_gbps = Get<double>(d, "kv_offload_store_gbps");
  return o;
}

TraceOptions ToTraceOptions(const py::dict& d) {
  TraceOptions t;
  Set(d, "trace_format", t.format);
  Set(d, "trace_block_tokens", t.trace_block_tokens);
  Set(d, "max_requests", t.max_requests);
  Set(d, "trace_start_s", t.start_s);
  Set(d, "trace_end_s", t.end_s);
  Set(d, "time_scale", t.time_scale);
  Set(d, "session_sample", t.session_sample_fraction);
  Set(d, "strict_arrival_order", t.reject_backwards_arrivals);
  Set(d, "seed", t.seed);  // analyze's; a replay's trace takes the replay's seed (sim/run)
  return t;
}

// The records of a trace given as Python dicts, as the JSON lines of its format: read by the
// same parsers as a file, from memory.
class StringByteSource : public ByteSource {
 public:
  explicit StringByteSource(std::shared_ptr<const std::string> text) : text_(std::move(text)) {}
  absl::StatusOr<size_t> Read(char* buffer, size_t size) override {
    const size_t n = std::min(size, text_->size() - position_);
    std::memcpy(buffer, text_->data() + position_, n);
    position_ += n;
    return n;
  }

 private:
  std::shared_ptr<const std::string> text_;
  size_t position_ = 0;
};

// A trace: a path (any format and compression the CLI reads) or records held in memory.
struct TraceInput {
  std::string path;                            // when records is null
  std::shared_ptr<const std::string> records;  // JSON lines
  // What error messages call records ("records:3: field 'hash_ids' ..."; the Python half turns
  // the line into the record's index).
  static constexpr const char* kRecordsName = "records";

  static TraceInput From(const py::object& trace) {
    TraceInput input;
    if (py::isinstance<py::bytes>(trace)) {
      input.records = std::make_shared<const std::string>(trace.cast<std::string>());
    } else {
      input.path = trace.cast<std::string>();
    }
    return input;
  }
  std::string label() const { return records ? std::string(kRecordsName) : path; }
  absl::StatusOr<std::unique_ptr<TraceReader>> Open(const TraceOptions& options) const {
    if (!records) return OpenTrace(path, options);
    return OpenTraceFromSource(kRecordsName, std::make_unique<StringByteSource>(records), options);
  }
};

// Everything a replay runs on, kept with its results so that a report page can replay the same
// trace at other capacities.
struct RunInputs {
  run::ReplayConfig config;
  TraceInput trace;
  run::ModelAndEngine loaded;
};

run::ReplayConfig ToReplayConfig(const py::dict& d) {
  run::ReplayConfig c;
  Set(d, "seed", c.seed);
  Set(d, "active_params", c.active_params);
  Set(d, "check_invariants", c.check_invariants);
  Set(d, "check_invariants_every", c.check_invariants_every);
  if (auto v = Get<bool>(d, "miss_causes")) c.no_miss_causes = !*v;
  Set(d, "miss_causes_memory_mb", c.miss_causes_memory_mb);
  if (auto v = Get<bool>(d, "fast_path")) c.no_fast_path = !*v;
  Set(d, "hit_rate_window", c.hit_rate_window);
  Set(d, "threads", c.threads);
  Set(d, "max_preemptions_without_finish", c.max_preemptions_without_finish);
  Set(d, "max_steps_without_finish", c.max_steps_without_finish);
  c.no_progress = true;  // progress is reported to Python, never printed by the library
  return c;
}

// A preset name that names no preset is a bad value (ValueError); a path to a file that is not
// there is a missing file (FileNotFoundError).
template <typename T>
T LoadedOrThrow(absl::StatusOr<T> loaded, const std::string& given, std::string_view field) {
  if (!loaded.ok() && loaded.status().code() == absl::StatusCode::kNotFound &&
      given.find('/') == std::string::npos && !given.ends_with(".json")) {
    ThrowStatus(absl::InvalidArgumentError(loaded.status().message()), field);
  }
  return ValueOrThrow(std::move(loaded), field);
}

// The model and engine as the CLI loads them (run::LoadModelAndEngine), step by step so that an
// error names the argument it is about.
run::ModelAndEngine LoadModelAndEngine(const std::string& model, const std::string& engine,
                                       const run::EngineOverrides& overrides) {
  run::ModelAndEngine out;
  out.engine = LoadedOrThrow(LoadEngine(engine), engine, "engine");
  if (absl::Status s = run::ApplyEngineOverrides(overrides, out.engine); !s.ok()) ThrowStatus(s);
  ModelLoadOptions load;
  load.tensor_parallel_size = out.engine.tensor_parallel_size;
  load.kv_dtype = out.engine.kv_cache_dtype;
  out.model = LoadedOrThrow(LoadModel(model, load), model, "model");
  return out;
}

// ---------------------------------------------------------------------------------------------
// Running without the GIL, with Ctrl-C and progress

// Runs `work` on a thread of its own while the calling thread, without the GIL, wakes every
// 100 ms to let Python run its signal handlers (a Ctrl-C raises KeyboardInterrupt there, in the
// main thread only) and to report progress. A pending exception from a handler sets `interrupt`
// to SIGINT, which stops the replay at its next event with a partial result; the exception is
// returned (fetched) for the caller to decide on.
struct PendingError {
  py::object type, value, traceback;
  bool set() const { return type && !type.is_none(); }
};

template <typename Work>
PendingError RunWithoutGil(Work&& work, std::atomic<int>& interrupt,
                           const std::function<void()>& tick) {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::exception_ptr failure;
  PendingError pending;
  {
    py::gil_scoped_release release;
    std::thread worker([&] {
      try {
        work();
      } catch (...) {
        failure = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex);
      done = true;
      finished.notify_all();
    });
    std::unique_lock<std::mutex> lock(mutex);
    while (!done) {
      finished.wait_for(lock, std::chrono::milliseconds(100));
      if (done) break;
      lock.unlock();
      {
        py::gil_scoped_acquire acquire;
        if (!pending.set() && PyErr_CheckSignals() != 0) {
          PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
          PyErr_Fetch(&type, &value, &traceback);
          pending.type = py::reinterpret_steal<py::object>(type);
          pending.value = py::reinterpret_steal<py::object>(value);
          pending.traceback = py::reinterpret_steal<py::object>(traceback);
          interrupt.store(SIGINT, std::memory_order_relaxed);
        }
        if (tick) {
          try {
            tick();
          } catch (py::error_already_set& e) {
            // An exception from a progress callback stops the run like Ctrl-C, then is raised.
            if (!pending.set()) {
              e.restore();
              PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
              PyErr_Fetch(&type, &value, &traceback);
              pending.type = py::reinterpret_steal<py::object>(type);
              pending.value = py::reinterpret_steal<py::object>(value);
              pending.traceback = py::reinterpret_steal<py::object>(traceback);
              interrupt.store(SIGINT, std::memory_order_relaxed);
            }
          }
        }
      }
      lock.lock();
    }
    lock.unlock();
    worker.join();
  }
  if (failure) std::rethrow_exception(failure);
  return pending;
}

// The latest progress of a replay, written by the simulation thread, read by the waiting one.
struct ProgressBoard {
  std::mutex mutex;
  ReplayProgress latest;
  bool fresh = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  std::function<void(const ReplayProgress&)> Writer() {
    return [this](const ReplayProgress& p) {
      std::lock_guard<std::mutex> lock(mutex);
      latest = p;
      fresh = true;
    };
  }
  // Calls `callback` with the latest progress if it changed (GIL held).
  void Report(const py::object& callback, bool done) {
    ReplayProgress p;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!fresh && !done) return;
      fresh = false;
      p = latest;
    }
    py::dict d;
    d["requests_read"] = p.requests_read;
    d["requests_finished"] = p.requests_finished;
    d["sim_time_s"] = static_cast<double>(p.sim_time_ns) / 1e9;
    d["elapsed_s"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    d["done"] = done;
    callback(d);
  }
};

// ---------------------------------------------------------------------------------------------
// Results

// One replay's result, as the Python half wraps it (prefixsim.ReplayResult).
struct NativeResult {
  std::shared_ptr<ReplayResult> result;
  std::shared_ptr<const RunInputs> inputs;
};

// The results as the report functions take them (by value). The per-request records, which only
// the HTML page reads, are copied only for it: a million of them are ~200 MB. (Called with the
// GIL held, so nothing else touches the results meanwhile.)
std::vector<ReplayResult> Copies(const std::vector<NativeResult>& results, bool with_records) {
  std::vector<ReplayResult> out;
  for (const NativeResult& r : results) {
    if (with_records) {
      out.push_back(*r.result);
      continue;
    }
    std::vector<RequestRecord> records;
    records.swap(r.result->per_request);
    out.push_back(*r.result);
    records.swap(r.result->per_request);
  }
  return out;
}

ReportOptions WithWallTime(bool include_wall_time) {
  ReportOptions options;
  options.include_wall_time = include_wall_time;
  return options;
}

template <typename T>
py::array_t<T> NewColumn(size_t n) {
  return py::array_t<T>(static_cast<py::ssize_t>(n));
}

// The per-request CSV's columns (sim/report/csv_report.cc), one NumPy array each, in its order.
// Cells the CSV leaves empty are NaN in float columns, -1 in category codes, and True in the
// "<column>.missing" mask of integer columns (pandas' nullable Int64).
py::dict RequestColumns(const ReplayResult& r) {
  const std::vector<RequestRecord>& records = r.per_request;
  const size_t n = records.size();
  const bool fleet = r.fleet.has_value();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

  auto id = NewColumn<int64_t>(n);
  auto arrival_s = NewColumn<double>(n);
  auto prompt = NewColumn<int64_t>(n), output = NewColumn<int64_t>(n), hit = NewColumn<int64_t>(n);
  auto alignment_loss = NewColumn<int64_t>(n), lost = NewColumn<int64_t>(n);
  auto ttft = NewColumn<double>(n), e2e = NewColumn<double>(n);
  auto preemptions = NewColumn<int32_t>(n);
  auto readmission = NewColumn<int64_t>(n);
  auto skipped = NewColumn<int8_t>(n), miss_cause = NewColumn<int8_t>(n);
  auto attributed_missing = NewColumn<bool>(n);
  std::vector<py::array_t<int64_t>> cause_tokens;
  for (int c = 1; c < kNumMissCauses; ++c) cause_tokens.push_back(NewColumn<int64_t>(n));
  auto elsewhere = NewColumn<int32_t>(n), replica = NewColumn<int32_t>(n);
  auto elsewhere_missing = NewColumn<bool>(n);
  auto regret = NewColumn<int64_t>(n);

  // Why a request was not served: the engine's reasons, in a fixed order, then any other.
  std::vector<std::string> skip_reasons = {"prompt_too_long", "does_not_fit", "empty_prompt",
                                           "interrupted"};
  auto skip_code = [&](const std::string& reason) -> int8_t {
    if (reason.empty()) return -1;
    auto it = std::find(skip_reasons.begin(), skip_reasons.end(), reason);
    if (it == skip_reasons.end()) {
      skip_reasons.push_back(reason);
      return static_cast<int8_t>(skip_reasons.size() - 1);
    }
    return static_cast<int8_t>(it - skip_reasons.begin());
  };

  auto* id_p = id.mutable_data();
  auto* arrival_p = arrival_s.mutable_data();
  auto *prompt_p = prompt.mutable_data(), *output_p = output.mutable_data(),
       *hit_p = hit.mutable_data();
  auto *alignment_p = alignment_loss.mutable_data(), *lost_p = lost.mutable_data();
  auto *ttft_p = ttft.mutable_data(), *e2e_p = e2e.mutable_data();
  auto* preemptions_p = preemptions.mutable_data();
  auto* readmission_p = readmission.mutable_data();
  auto *skipped_p = skipped.mutable_data(), *cause_p = miss_cause.mutable_data();
  auto* attributed_missing_p = attributed_missing.mutable_data();
  std::vector<int64_t*> cause_tokens_p;
  for (auto& column : cause_tokens) cause_tokens_p.push_back(column.mutable_data());
  auto *elsewhere_p = elsewhere.mutable_data(), *replica_p = replica.mutable_data();
  auto* elsewhere_missing_p = elsewhere_missing.mutable_data();
  auto* regret_p = regret.mutable_data();
  for (size_t i = 0; i < n; ++i) {
    const RequestRecord& rec = records[i];
    id_p[i] = static_cast<int64_t>(rec.id);
    arrival_p[i] = static_cast<double>(rec.arrival_ns) / 1e9;
    prompt_p[i] = rec.prompt_tokens;
    output_p[i] = rec.output_tokens;
    hit_p[i] = rec.hit_tokens;
    alignment_p[i] = rec.alignment_loss_tokens;
    lost_p[i] = rec.lost_to_alignment_tokens;
    // As the CSV: times only for served requests, and never negative.
    const bool served = rec.finish_ns >= 0;
    const int64_t ttft_ns = rec.first_token_ns - rec.arrival_ns;
    const int64_t e2e_ns = rec.finish_ns - rec.arrival_ns;
    ttft_p[i] = served && ttft_ns >= 0 ? static_cast<double>(ttft_ns) / 1e6 : kNaN;
    e2e_p[i] = served && e2e_ns >= 0 ? static_cast<double>(e2e_ns) / 1e6 : kNaN;
    preemptions_p[i] = rec.preemptions;
    readmission_p[i] = rec.readmission_hit_tokens;
    skipped_p[i] = skip_code(rec.skipped);
    const bool attributed = rec.miss.total() != 0;
    attributed_missing_p[i] = !attributed;
    cause_p[i] = attributed ? static_cast<int8_t>(rec.miss.main_cause()) : int8_t{-1};
    for (int c = 1; c < kNumMissCauses; ++c) {
      cause_tokens_p[c - 1][i] = attributed ? rec.miss.tokens[c] : 0;
    }
    elsewhere_p[i] = rec.miss.elsewhere_replica;
    elsewhere_missing_p[i] = rec.miss.elsewhere_replica < 0;
    replica_p[i] = rec.replica;
    regret_p[i] = rec.routing_regret_tokens;
  }

  std::vector<std::string> cause_names;
  for (int c = 0; c < kNumMissCauses; ++c) {
    cause_names.emplace_back(MissCauseName(static_cast<MissCause>(c)));
  }
  py::dict columns;  // insertion-ordered: the CSV's column order
  columns["id"] = id;
  columns["arrival_s"] = arrival_s;
  columns["prompt_tokens"] = prompt;
  columns["output_tokens"] = output;
  columns["hit_tokens"] = hit;
  columns["alignment_loss_tokens"] = alignment_loss;
  columns["lost_to_alignment_tokens"] = lost;
  columns["ttft_ms"] = ttft;
  columns["e2e_ms"] = e2e;
  columns["preemptions"] = preemptions;
  columns["readmission_hit_tokens"] = readmission;
  columns["skipped"] = py::make_tuple(skipped, skip_reasons);
  columns["miss_cause"] = py::make_tuple(miss_cause, cause_names);
  for (int c = 1; c < kNumMissCauses; ++c) {
    columns[py::str(absl::StrCat(cause_names[c], "_tokens"))] =
        py::make_tuple(cause_tokens[c - 1], attributed_missing);
  }
  // With offload tiers, as the CSV: the GPU's share of each hit, then each tier's.
  if (r.offload.enabled) {
    auto gpu = NewColumn<int64_t>(n);
    auto* gpu_p = gpu.mutable_data();
    for (size_t i = 0; i < n; ++i) gpu_p[i] = records[i].gpu_hit_tokens;
    columns["gpu_hit_tokens"] = gpu;
    for (size_t t = 0; t < r.offload.tiers.size(); ++t) {
      auto tier = NewColumn<int64_t>(n);
      auto* tier_p = tier.mutable_data();
      for (size_t i = 0; i < n; ++i) tier_p[i] = records[i].tier_hit_tokens[t];
      columns[py::str(
          absl::StrCat(absl::AsciiStrToLower(r.offload.tiers[t].medium), "_hit_tokens"))] = tier;
    }
    auto tier_evicted = NewColumn<int64_t>(n), not_stored = NewColumn<int64_t>(n);
    auto *tier_evicted_p = tier_evicted.mutable_data(), *not_stored_p = not_stored.mutable_data();
    for (size_t i = 0; i < n; ++i) {
      tier_evicted_p[i] = records[i].miss.tier_evicted;
      not_stored_p[i] = records[i].miss.tier_not_stored;
    }
    columns["tier_evicted_tokens"] = py::make_tuple(tier_evicted, attributed_missing);
    columns["tier_not_stored_tokens"] = py::make_tuple(not_stored, attributed_missing);
  }
  if (fleet) {
    columns["elsewhere_replica"] = py::make_tuple(elsewhere, elsewhere_missing);
    columns["replica"] = replica;
    columns["routing_regret_tokens"] = regret;
  }
  return columns;
}

// ---------------------------------------------------------------------------------------------
// Commands

// `prefixsim resolve`: the plan as JSON text, its table, and the startup check's verdict.
py::dict Resolve(const std::string& model, const std::string& engine, const std::string& policy,
                 const py::dict& overrides) {
  const run::ModelAndEngine loaded = LoadModelAndEngine(model, engine, ToOverrides(overrides));
  const KvPlan plan = ValueOrThrow(ResolveKvPlan(loaded.model, loaded.engine, policy), "policy");
  py::dict out;
  out["json"] = KvPlanToJson(plan).dump(2);
  out["text"] = FormatKvPlan(plan);
  out["model"] = loaded.model.name;
  out["engine"] = loaded.engine.source;
  out["assumptions"] = loaded.model.assumptions;
  const absl::Status startup = CheckStartupMemory(plan);
  out["startup_error"] = startup.ok() ? std::string() : std::string(startup.message());
  out["small_pool_warning"] = SmallPoolWarning(plan);
  return out;
}

// `prefixsim replay` (one policy) and `compare` (several, run in parallel as compare runs them):
// the results, and whether Ctrl-C (or an exception from `progress`) stopped them.
py::tuple Replay(const py::object& trace, const std::string& model, const std::string& engine,
                 const std::vector<std::string>& policies, const py::dict& overrides,
                 const py::dict& trace_options, const py::dict& config, bool keep_records,
                 const py::object& progress) {
  auto inputs = std::make_shared<RunInputs>();
  inputs->trace = TraceInput::From(trace);
  inputs->config = ToReplayConfig(config);
  inputs->config.trace = inputs->trace.label();
  inputs->config.trace_options = ToTraceOptions(trace_options);
  inputs->config.model_engine.model = model;
  inputs->config.model_engine.engine = engine;
  inputs->config.model_engine.overrides = ToOverrides(overrides);
  if (inputs->trace.records) {
    const TraceInput records = inputs->trace;
    inputs->config.open_trace = [records](const TraceOptions& options) {
      return records.Open(options);
    };
  }
  bool has_prefix_identity = true;
  // The trace first, as the CLI checks it (CheckTraceInput): a bad first record or option fails
  // before the model is loaded.
  {
    TraceOptions options = inputs->config.trace_options;
    options.seed = inputs->config.seed;
    std::unique_ptr<TraceReader> reader = ValueOrThrow(inputs->trace.Open(options), "trace");
    has_prefix_identity = reader->has_prefix_identity();
    Request first;
    if (absl::StatusOr<bool> read = reader->Next(&first); !read.ok()) {
      ThrowStatus(read.status(), "trace");
    }
  }
  inputs->loaded = LoadModelAndEngine(model, engine, inputs->config.model_engine.overrides);
  // What the CLI says on stderr before it replays, for the Python half to warn with.
  std::vector<std::string> warnings;
  for (const std::string& a : inputs->loaded.model.assumptions) {
    warnings.push_back(absl::StrCat("assumption: ", a));
  }
  std::vector<KvPlan> plans;
  for (const std::string& policy : policies) {
    plans.push_back(
        ValueOrThrow(ResolvePlanForServing(inputs->loaded.model, inputs->loaded.engine, policy)));
    if (std::string w = SmallPoolWarning(plans.back()); !w.empty()) warnings.push_back(w);
  }
  if (!has_prefix_identity) {
    warnings.push_back(
        absl::StrCat(inputs->trace.label(),
                     " has no prefix identity (lengths only): every request is unique content, so "
                     "prefix-cache hit rates are 0 by construction"));
  }
  if (std::string w = PrefixCachingDisabledWarning(plans.front()); !w.empty()) {
    warnings.push_back(w);
  }

  std::atomic<int> interrupt{0};
  ProgressBoard board;
  std::vector<std::optional<absl::StatusOr<ReplayResult>>> results(plans.size());
  const std::shared_ptr<const RunInputs> shared = inputs;
  // Read here, with the GIL: the worker threads below never touch a Python object.
  const bool report_progress = !progress.is_none();
  auto work = [&] {
    ParallelFor(plans.size(), shared->config.threads, [&](size_t i) {
      // Progress follows the first policy, as compare's progress line does.
      std::function<void(const ReplayProgress&)> on_progress;
      if (i == 0 && report_progress) on_progress = board.Writer();
      results[i] = run::RunReplay(shared->config, shared->loaded.model, shared->loaded.engine,
                                  plans[i], &interrupt, std::move(on_progress), keep_records);
    });
  };

  std::function<void()> tick;
  if (report_progress) tick = [&] { board.Report(progress, /*done=*/false); };
  PendingError pending = RunWithoutGil(work, interrupt, tick);
  if (report_progress && !pending.set()) board.Report(progress, /*done=*/true);

  py::list out;
  for (auto& r : results) {
    if (!r->ok()) {
      if (pending.set()) break;  // the interruption, not the error, is what the caller sees
      ThrowStatus(r->status());
    }
    out.append(NativeResult{std::make_shared<ReplayResult>(*std::move(*r)), shared});
  }
  bool keyboard_interrupt = false;
  if (pending.set()) {
    keyboard_interrupt = PyErr_GivenExceptionMatches(pending.type.ptr(), PyExc_KeyboardInterrupt);
    // Another exception (from a progress callback or a signal handler) is raised as it was, and
    // so is a KeyboardInterrupt that came before any result could be made.
    if (!keyboard_interrupt || out.size() != policies.size()) {
      PyErr_Restore(pending.type.release().ptr(), pending.value.release().ptr(),
                    pending.traceback.release().ptr());
      throw py::error_already_set();
    }
  }
  return py::make_tuple(out, keyboard_interrupt, warnings);
}

// The report page of `replay --html` / `compare --html` (sim/cli/html_page.cc is the CLI's; both
// plan the sweep with PlanCapacitySweep): the capacity sweep, each result's policy at each of
// `capacities` (bytes), and the trace's alignment curve, then sim/report's page.
void WriteHtml(const std::vector<NativeResult>& results, const std::string& path,
               const std::string& command, bool deltas, const std::vector<int64_t>& capacities) {
  if (results.empty()) throw py::value_error("no results to write");
  const RunInputs& inputs = *results.front().inputs;
  const run::ModelAndEngine& loaded = inputs.loaded;
  const std::vector<ReplayResult> copies = Copies(results, /*with_records=*/true);
  for (const int64_t bytes : capacities) {
    if (bytes <= 0)
      throw py::value_error(absl::StrCat("`capacities`: ", bytes, " is not positive"));
  }
  HtmlReportOptions page;
  page.title = absl::StrCat("prefixsim ", command, ": ", loaded.model.name);
  page.subtitle =
      absl::StrCat("model ", loaded.model.name, " · engine ",
                   std::filesystem::path(loaded.engine.source).filename().string(), " · trace ",
                   std::filesystem::path(inputs.trace.label()).filename().string());
  page.deltas = deltas;
  page.configured_kv_cache_bytes = loaded.engine.kv_cache_bytes.value_or(0);
  const std::vector<CapacitySweepJob> jobs =
      PlanCapacitySweep(copies, capacities, !loaded.engine.num_gpu_blocks, &page);
  std::vector<std::optional<absl::StatusOr<CapacitySweepPoint>>> done(jobs.size());
  AnalyzeOptions analyze_options;
  for (const ReplayResult& r : copies) analyze_options.alignments.push_back(r.plan.hit_alignment);
  analyze_options.capacity_curve = false;
  TraceOptions trace_options = inputs.config.trace_options;
  trace_options.seed = inputs.config.seed;
  absl::StatusOr<AnalyzeResult> analyzed = absl::UnknownError("not analyzed");
  std::atomic<int> interrupt{0};
  auto work = [&] {
    ParallelFor(jobs.size() + 1, /*jobs=*/0, [&](size_t k) {
      if (k == 0) {
        absl::StatusOr<std::unique_ptr<TraceReader>> reader = inputs.trace.Open(trace_options);
        if (!reader.ok()) {
          analyzed = reader.status();
          return;
        }
        analyzed = AnalyzeRequestStream([&](Request* out) { return (*reader)->Next(out); },
                                        analyze_options);
        return;
      }
      const CapacitySweepJob& job = jobs[k - 1];
      EngineConfig engine = loaded.engine;
      engine.kv_cache_bytes = job.bytes;
      engine.num_gpu_blocks.reset();
      const std::string& policy = copies[job.result].policy;
      absl::StatusOr<KvPlan> plan = ResolvePlanForServing(loaded.model, engine, policy);
      absl::StatusOr<ReplayResult> r =
          plan.ok() ? run::RunReplay(inputs.config, loaded.model, engine, *plan, &interrupt, {},
                                     /*keep_records=*/false)
                    : plan.status();
      if (!r.ok()) {
        done[k - 1] = absl::Status(
            r.status().code(), absl::StrCat("`capacities` ", job.bytes, " bytes, policy ", policy,
                                            ": ", r.status().message()));
        return;
      }
      done[k - 1] = SweepPointOf(*r, job.bytes);
    });
  };
  PendingError pending = RunWithoutGil(work, interrupt, {});
  if (pending.set()) {
    PyErr_Restore(pending.type.release().ptr(), pending.value.release().ptr(),
                  pending.traceback.release().ptr());
    throw py::error_already_set();
  }
  for (auto& d : done) {
    if (!d->ok()) ThrowStatus(d->status());
    page.capacity_sweep.push_back(**d);
  }
  if (analyzed.ok()) {
    page.analyze = &*analyzed;
  } else {
    page.analyze_error = std::string(analyzed.status().message());
  }
  if (absl::Status s = WriteFileAtomically(path, HtmlReport(copies, page)); !s.ok()) {
    ThrowStatus(s, "path");
  }
}

// `prefixsim analyze`: the JSON report and the text.
py::tuple Analyze(const py::object& trace, const py::dict& trace_options, int64_t block_tokens,
                  const std::vector<int64_t>& alignments, const std::vector<int64_t>& capacities,
                  bool capacity_curve) {
  const TraceInput input = TraceInput::From(trace);
  const TraceOptions options = ToTraceOptions(trace_options);
  AnalyzeOptions analyze;
  analyze.block_tokens = block_tokens;
  analyze.alignments.insert(analyze.alignments.end(), alignments.begin(), alignments.end());
  analyze.capacities = capacities;
  analyze.capacity_curve = capacity_curve;
  absl::StatusOr<AnalyzeResult> result = absl::UnknownError("not run");
  std::atomic<int> interrupt{0};
  auto work = [&] {
    if (!input.records) {
      result = AnalyzeTraceFile(input.path, options, analyze);
      return;
    }
    absl::StatusOr<std::unique_ptr<TraceReader>> reader = input.Open(options);
    if (!reader.ok()) {
      result = reader.status();
      return;
    }
    AnalyzeOptions resolved = analyze;
    if (resolved.block_tokens == 0) {
      // The format's native block, as AnalyzeTraceFile chooses it.
      const int64_t trace_block = options.trace_block_tokens;
      if ((*reader)->format() == "mooncake")
        resolved.block_tokens = trace_block > 0 ? trace_block : 512;
      if ((*reader)->format() == "bailian")
        resolved.block_tokens = trace_block > 0 ? trace_block : 16;
    }
    result = AnalyzeRequestStream([&](Request* out) { return (*reader)->Next(out); }, resolved);
  };
  // The analysis has no interruption point: Ctrl-C is raised once it is done.
  PendingError pending = RunWithoutGil(work, interrupt, {});
  if (pending.set()) {
    PyErr_Restore(pending.type.release().ptr(), pending.value.release().ptr(),
                  pending.traceback.release().ptr());
    throw py::error_already_set();
  }
  if (!result.ok()) ThrowStatus(result.status(), "trace");
  return py::make_tuple(AnalyzeResultToJson(*result), FormatAnalyzeResult(*result));
}

// `prefixsim gen-trace`: the trace's text (mooncake or tokens JSON lines) and its request count.
py::tuple GenTrace(const std::string& kind, uint64_t seed, int64_t requests, double rate_per_s,
                   const std::string& arrival, int64_t max_prompt_tokens, const std::string& format,
                   int64_t block_tokens) {
  WorkloadOptions workload;
  workload.kind = kind;
  workload.seed = seed;
  workload.requests = requests;
  workload.rate_per_s = rate_per_s;
  workload.arrival = arrival;
  workload.max_prompt_tokens = max_prompt_tokens;
  std::string text;
  size_t count = 0;
  absl::Status status;
  {
    py::gil_scoped_release release;
    absl::StatusOr<std::vector<GeneratedRequest>> generated = GenerateWorkload(workload);
    if (generated.ok()) {
      count = generated->size();
      text = format == "mooncake" ? FormatMooncakeTrace(*generated, block_tokens)
                                  : FormatTokensTrace(*generated);
    } else {
      status = generated.status();
    }
  }
  if (!status.ok()) ThrowStatus(status);
  return py::make_tuple(py::bytes(text), count);
}

}  // namespace
}  // namespace prefixsim::python

PYBIND11_MODULE(_core, m) {
  using namespace prefixsim;
  using namespace prefixsim::python;
  m.doc() =
      "The native part of prefixsim (docs/python.md): use the functions of the `prefixsim` "
      "package, not these.";

  py::class_<NativeResult>(m, "NativeResult")
      .def_property_readonly("policy", [](const NativeResult& r) { return r.result->policy; })
      .def_property_readonly("partial", [](const NativeResult& r) { return r.result->partial; })
      .def_property_readonly("has_requests",
                             [](const NativeResult& r) { return !r.result->per_request.empty(); })
      .def(
          "json",
          [](const NativeResult& r, bool include_wall_time) {
            return ReplayReportJson(*r.result, WithWallTime(include_wall_time));
          },
          py::arg("include_wall_time"))
      .def(
          "text",
          [](const NativeResult& r, bool include_wall_time) {
            return ReplayReportText(*r.result, WithWallTime(include_wall_time));
          },
          py::arg("include_wall_time"))
      .def("csv",
           [](const NativeResult& r) {
             std::ostringstream out;
             WriteRequestsCsv(*r.result, out);
             return out.str();
           })
      .def("request_columns", [](const NativeResult& r) { return RequestColumns(*r.result); })
      .def_property_readonly("model",
                             [](const NativeResult& r) { return r.inputs->loaded.model.name; })
      .def_property_readonly("engine",
                             [](const NativeResult& r) { return r.inputs->loaded.engine.source; })
      .def_property_readonly("trace",
                             [](const NativeResult& r) { return r.inputs->trace.label(); });

  m.def("resolve", &prefixsim::python::Resolve, py::arg("model"), py::arg("engine"),
        py::arg("policy"), py::arg("overrides"));
  m.def("replay", &prefixsim::python::Replay, py::arg("trace"), py::arg("model"), py::arg("engine"),
        py::arg("policies"), py::arg("overrides"), py::arg("trace_options"), py::arg("config"),
        py::arg("keep_records"), py::arg("progress"));
  m.def(
      "comparison_json",
      [](const std::vector<NativeResult>& results, bool include_wall_time) {
        return ComparisonReportJson(Copies(results, /*with_records=*/false),
                                    WithWallTime(include_wall_time));
      },
      py::arg("results"), py::arg("include_wall_time"));
  m.def(
      "comparison_text",
      [](const std::vector<NativeResult>& results) {
        return ComparisonReportText(Copies(results, /*with_records=*/false));
      },
      py::arg("results"));
  m.def("write_html", &prefixsim::python::WriteHtml, py::arg("results"), py::arg("path"),
        py::arg("command"), py::arg("deltas"), py::arg("capacities"));
  m.def("analyze", &prefixsim::python::Analyze, py::arg("trace"), py::arg("trace_options"),
        py::arg("block_tokens"), py::arg("alignments"), py::arg("capacities"),
        py::arg("capacity_curve"));
  m.def("gen_trace", &prefixsim::python::GenTrace, py::arg("kind"), py::arg("seed"),
        py::arg("requests"), py::arg("rate_per_s"), py::arg("arrival"),
        py::arg("max_prompt_tokens"), py::arg("format"), py::arg("block_tokens"));
  m.def("policies", &RegisteredPolicyNames);
  m.def("trace_formats", &RegisteredTraceFormats);
  m.def("parse_byte_size", [](const std::string& text, const std::string& field) {
    return ValueOrThrow(ParseByteSize(text, absl::StrCat("`", field, "`")));
  });
}
