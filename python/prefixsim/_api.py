"""The functions of the module: the CLI's commands, with keyword arguments named after its flags
(docs/python.md)."""

import json
import os
import sys
import warnings

from . import _core, _options, _traces
from ._results import AnalyzeResult, Comparison, Plan, ReplayResult, _write_text


class ReplayInterrupted(KeyboardInterrupt):
    """Ctrl-C during a replay: raised once the replay has stopped, with what it simulated up to
    then in `result` (a ReplayResult or a Comparison, marked partial), as the CLI prints its
    summary under a PARTIAL line before it exits 130."""

    def __init__(self, result):
        super().__init__("replay interrupted; the partial result is in .result")
        self.result = result


def _call(function, *args, **kwargs):
    """Calls the native half, with library messages in the keywords' names."""
    try:
        return function(*args, **kwargs)
    except FileNotFoundError as e:
        raise FileNotFoundError(_options.keyword_message(str(e))) from None
    except ValueError as e:
        raise ValueError(_options.keyword_message(str(e))) from None
    except RuntimeError as e:
        raise RuntimeError(_options.keyword_message(str(e))) from None


def _check_policy(policy, name="policy"):
    if not isinstance(policy, str) or policy not in _core.policies():
        known = ", ".join(_core.policies())
        raise ValueError(f"`{name}`: unknown policy {policy!r} (registered: {known})")
    return policy


def _check_name(name, value):
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"`{name}` must be a preset name or a path to a JSON file, got {value!r}")
    return value


class _ProgressLine:
    """progress=True: the CLI's progress line on stderr, once a run has lasted a second (a line
    rewritten in place on a terminal, else one every 10 s)."""

    def __init__(self, label):
        self.label = label
        self.terminal = sys.stderr.isatty()
        self.interval = 0.2 if self.terminal else 10.0
        self.last = 0.0
        self.printed = False

    def __call__(self, p):
        elapsed = p["elapsed_s"]
        if elapsed < 1.0 or (not p["done"] and elapsed - self.last < self.interval):
            return
        if p["done"] and not self.printed:
            return
        self.last = elapsed
        self.printed = True
        line = (f"{self.label}: {p['requests_read']} requests read, {p['requests_finished']} "
                f"done, {p['sim_time_s']:.0f} s simulated, {elapsed:.1f} s")
        end = "\n" if p["done"] or not self.terminal else ""
        sys.stderr.write(("\r" if self.terminal else "") + line + end)
        sys.stderr.flush()


def _progress_callback(progress, label):
    if progress is None or progress is False:
        return None
    if progress is True:
        return _ProgressLine(label)
    if callable(progress):
        return progress
    raise ValueError(f"`progress` must be True, False or a callable, got {progress!r}")


def _run(function, trace, model, engine, policies, requests, progress, on_interrupt, options):
    if on_interrupt not in ("raise", "return"):
        raise ValueError(f"`on_interrupt` must be 'raise' or 'return', got {on_interrupt!r}")
    if not isinstance(requests, bool):
        raise ValueError(f"`requests` must be True or False, got {requests!r}")
    overrides, trace_options, config = _options.split(
        function, options, _options.ENGINE_OVERRIDES, _options.TRACE_OPTIONS,
        _options.REPLAY_OPTIONS)
    if "trace_format" in trace_options and trace_options["trace_format"] not in \
            _core.trace_formats():
        known = ", ".join(_core.trace_formats())
        raise ValueError(f"`trace_format`: unknown format {trace_options['trace_format']!r} "
                         f"(known: {known})")
    model = _check_name("model", model)
    engine = _check_name("engine", engine)
    source = _traces.resolve(trace)
    natives, interrupted, notes = _call(
        _core.replay, source, model, engine, list(policies), overrides, trace_options, config,
        requests, _progress_callback(progress, function))
    for note in notes:
        warnings.warn(f"prefixsim {function}: {_options.keyword_message(note)}", stacklevel=3)
    return natives, interrupted


def resolve(model, engine, policy="new", *, strict=False, **overrides):
    """The KV cache plan of `model` on `engine` under a block-size policy (`prefixsim resolve`).

    model, engine -- preset names (configs/models/, configs/engines/) or JSON paths; `model` also
                     takes a HuggingFace config.json or a folder holding one
    policy        -- "old", "new", "new_divisor_of" or another registered policy
    strict        -- raise ValueError when vLLM's startup memory check fails (default: a warning;
                     replay refuses such a plan either way)
    **overrides   -- engine settings, named as the CLI's flags: block_size, kv_cache_bytes
                     (bytes or "64GiB"), num_gpu_blocks, max_model_len, tensor_parallel_size,
                     kv_cache_dtype, num_speculative_tokens, no_spec, ... (docs/python.md)

    Returns a Plan (groups with kind and block sizes, S, H, A, num_blocks, startup_check;
    to_dict() is `resolve --json`)."""
    (checked,) = _options.split("resolve", overrides, _options.ENGINE_OVERRIDES)
    native = _call(_core.resolve, _check_name("model", model), _check_name("engine", engine),
                   _check_policy(policy), checked)
    plan = Plan(native)
    for note in plan.assumptions:
        warnings.warn(f"prefixsim resolve: assumption: {note}", stacklevel=2)
    if native["startup_error"]:
        message = ("startup check failed (replay and compare refuse this plan): "
                   + native["startup_error"])
        if strict:
            raise ValueError(message)
        warnings.warn(f"prefixsim resolve: {message}", stacklevel=2)
    return plan


def replay(trace, model, engine, policy="new", *, replicas=None, router=None, requests=True,
           progress=False, on_interrupt="raise", **options):
    """Replays `trace` through a simulated vLLM engine, or a fleet of them (`prefixsim replay`).

    trace     -- a path (Mooncake, Bailian, token-id JSONL, LLMServingSim, length CSV; plain, .gz
                 or .zst), or records: an iterable of dicts in one of the JSON formats, or a
                 DataFrame whose rows are such records
    model, engine, policy -- as for resolve()
    replicas  -- fleet size, or "auto" for the smallest fleet that keeps up (default: the
                 engine's, 1 unless its JSON says otherwise)
    router    -- round_robin, random, least_loaded, session, kv_aware, kv_aware_unaligned
    requests  -- keep one record per request (ReplayResult.requests); False saves memory
    progress  -- True for the CLI's progress line on stderr, or a callable taking a dict
                 (requests_read, requests_finished, sim_time_s, elapsed_s, done)
    on_interrupt -- what Ctrl-C does: "raise" ReplayInterrupted (a KeyboardInterrupt) with the
                 partial result in .result, or "return" the partial result
    **options -- engine overrides (see resolve), trace shaping (max_requests, trace_start_s,
                 trace_end_s, time_scale, session_sample, trace_format, trace_block_tokens,
                 strict_arrival_order) and replay settings (seed, miss_causes,
                 miss_causes_memory_mb, hit_rate_window, threads, check_invariants, ...),
                 each named as the CLI's flag

    Returns a ReplayResult: .summary (the `--json` dict), .requests (the `--csv` rows as a
    DataFrame), .groups, .replicas, .to_json() equal to the CLI's `--json`. The GIL is released
    while the engine runs."""
    options.update(replicas=replicas, router=router)
    natives, interrupted = _run("replay", trace, model, engine, [_check_policy(policy)],
                                requests, progress, on_interrupt, options)
    result = ReplayResult(natives[0])
    if interrupted and on_interrupt == "raise":
        raise ReplayInterrupted(result)
    return result


def compare(trace, model, engine, policies=("old", "new"), *, replicas=None, router=None,
            requests=True, progress=False, on_interrupt="raise", **options):
    """Replays one trace under several policies in parallel, deltas against the first
    (`prefixsim compare`). Arguments as for replay(); `policies` is a sequence of names.

    Returns a Comparison: .results {policy: ReplayResult}, .summary (the `--json` dict), .deltas
    (a DataFrame), .to_json(), .to_html(path, capacities=None)."""
    if isinstance(policies, str):
        policies = [p.strip() for p in policies.split(",") if p.strip()]
    policies = list(policies)
    if not policies:
        raise ValueError("`policies` is empty")
    for p in policies:
        _check_policy(p, "policies")
    for i, p in enumerate(policies):
        if p in policies[:i]:
            raise ValueError(f"`policies`: {p!r} is given twice")
    options.update(replicas=replicas, router=router)
    natives, interrupted = _run("compare", trace, model, engine, policies, requests, progress,
                                on_interrupt, options)
    result = Comparison(natives)
    if interrupted and on_interrupt == "raise":
        raise ReplayInterrupted(result)
    return result


def analyze(trace, *, block_tokens=None, alignments=(), capacity_blocks=None,
            capacity_curve=True, **trace_options):
    """What a trace could give at best, independent of any engine (`prefixsim analyze`): the
    prefix-sharing forest, the upper-bound hit rate per hit alignment, LRU and optimal hit rate
    per cache capacity.

    trace           -- a path or records, as for replay()
    block_tokens    -- tokens per analysis block (default: the trace's native block)
    alignments      -- extra hit alignments (tokens), added to the powers of two 16..16384
    capacity_blocks -- cache capacities in blocks (default: powers of two up to the unique blocks)
    capacity_curve  -- False skips the capacity curve (saves memory)
    **trace_options -- max_requests, trace_start_s, trace_end_s, time_scale, session_sample,
                       seed, trace_format, trace_block_tokens, strict_arrival_order

    Returns an AnalyzeResult: .summary (the `--json` dict), .alignment_curve, .capacity_curve."""
    seed = trace_options.pop("seed", None)
    (checked,) = _options.split("analyze", trace_options, _options.TRACE_OPTIONS)
    if seed is not None:
        checked["seed"] = _options.REPLAY_OPTIONS["seed"]("seed", seed)
    block = 0 if block_tokens is None else _options._int(1)("block_tokens", block_tokens)
    alignments = [_options._int(1)("alignments", a) for a in alignments]
    capacities = [] if capacity_blocks is None else [
        _options._int(1)("capacity_blocks", c) for c in capacity_blocks]
    if capacities and not capacity_curve:
        raise ValueError("`capacity_blocks` needs the capacity curve (capacity_curve=True)")
    json_text, text = _call(_core.analyze, _traces.resolve(trace), checked, block, alignments,
                            capacities, _options._bool("capacity_curve", capacity_curve))
    return AnalyzeResult(json_text, text)


def gen_trace(kind="chat", *, seed=1, requests=300, rate=1.0, arrival="poisson",
              max_prompt_tokens=65536, format="mooncake", block_tokens=None, out=None):
    """A reproducible synthetic trace (`prefixsim gen-trace`): the same arguments give the same
    bytes as the CLI.

    kind    -- chat, agentic or shared_doc
    format  -- mooncake (hash ids of `block_tokens` tokens, default 512) or tokens (token ids)
    out     -- a path to write the trace to (returned); None returns the records as a list of
               dicts, which replay() and analyze() take as they are."""
    if format not in ("mooncake", "tokens"):
        raise ValueError(f"`format`: unknown output format {format!r}; one of mooncake, tokens")
    if block_tokens is not None and format != "mooncake":
        raise ValueError("`block_tokens` sets the tokens per hash id of format='mooncake'; a "
                         "tokens trace has none")
    block = 512 if block_tokens is None else _options._int(1)("block_tokens", block_tokens)
    checked = dict(
        kind=_options._str("kind", kind),
        seed=_options.REPLAY_OPTIONS["seed"]("seed", seed),
        requests=_options._int(1)("requests", requests),
        rate_per_s=_options._float(0, strict_minimum=True)("rate", rate),
        arrival=_options._str("arrival", arrival),
        max_prompt_tokens=_options._int(1)("max_prompt_tokens", max_prompt_tokens),
    )
    text, _count = _call(_core.gen_trace, format=format, block_tokens=block, **checked)
    if out is None:
        return [json.loads(line) for line in text.decode().splitlines() if line]
    _write_text(out, text.decode())
    return os.fspath(out)


def policies():
    """The registered block-size policies."""
    return list(_core.policies())


def trace_formats():
    """The trace formats the readers detect."""
    return list(_core.trace_formats())
