"""Keyword arguments: their names (the CLI's flags, dashes as underscores), their checks, and the
conversion of library messages that name a flag into messages that name the keyword.

Every check raises ValueError naming the keyword, before anything runs, so that a typo in a sweep
fails at once and not after an hour of replays."""

import difflib
import math
import numbers
import re

from . import _core

# The CLI's largest fleet and block count (sim/fleet, kMaxNumBlocks): checked again by the library.
_MAX_REPLICAS = 4096
_MAX_NUM_BLOCKS = (1 << 31) - 2


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_bool(value):
    # numpy's bool_ is not a bool subclass; a DataFrame cell or a NumPy scalar may be one.
    return isinstance(value, bool) or type(value).__name__ == "bool_"


def _int(minimum=None, maximum=None):
    def check(name, value):
        if not _is_int(value):
            raise ValueError(f"`{name}` must be an integer, got {value!r}")
        value = int(value)
        if minimum is not None and value < minimum:
            what = {0: "non-negative", 1: "positive"}.get(minimum, f"at least {minimum}")
            raise ValueError(f"`{name}` must be {what}, got {value}")
        if maximum is not None and value > maximum:
            raise ValueError(f"`{name}` must be at most {maximum}, got {value}")
        return value

    return check


def _float(minimum=None, maximum=None, strict_minimum=False):
    def check(name, value):
        if not isinstance(value, numbers.Real) or _is_bool(value) or not math.isfinite(value):
            raise ValueError(f"`{name}` must be a finite number, got {value!r}")
        value = float(value)
        if minimum is not None and (value <= minimum if strict_minimum else value < minimum):
            what = "positive" if strict_minimum and minimum == 0 else (
                "non-negative" if minimum == 0 else f"at least {minimum}")
            raise ValueError(f"`{name}` must be {what}, got {value}")
        if maximum is not None and value > maximum:
            raise ValueError(f"`{name}` must be at most {maximum}, got {value}")
        return value

    return check


def _bool(name, value):
    if not _is_bool(value):
        raise ValueError(f"`{name}` must be True or False, got {value!r}")
    return bool(value)


def _str(name, value):
    if not isinstance(value, str) or not value:
        raise ValueError(f"`{name}` must be a non-empty string, got {value!r}")
    return value


def _byte_size(name, value):
    """Bytes, or a size with a unit as the CLI takes it ("64GiB", "1.5TiB")."""
    if _is_int(value):
        if value <= 0:
            raise ValueError(f"`{name}` must be positive, got {value}")
        return int(value)
    if isinstance(value, str):
        return _core.parse_byte_size(value, name)
    raise ValueError(f"`{name}` must be bytes (an integer) or a size such as '64GiB', got {value!r}")


def _replicas(name, value):
    if isinstance(value, str) and value == "auto":
        return "auto"
    return str(_int(1, _MAX_REPLICAS)(name, value))


def _retention(name, value):
    """Tokens, or "dense" (vLLM's None; a Python None leaves the engine's setting)."""
    if isinstance(value, str) and value == "dense":
        return "dense"
    return str(_int(0)(name, value))


# Engine overrides (the CLI's "engine overrides" and "fleet" flags).
ENGINE_OVERRIDES = {
    "block_size": _int(1),
    "kv_cache_bytes": _byte_size,
    "num_gpu_blocks": _int(2, _MAX_NUM_BLOCKS),
    "max_num_batched_tokens": _int(1),
    "max_num_seqs": _int(1),
    "max_model_len": _int(1),
    "long_prefill_token_threshold": _int(0),
    "prefix_match_unit": _int(1),
    "tensor_parallel_size": _int(1),
    "num_speculative_tokens": _int(0),
    "speculative_method": _str,
    "kv_cache_dtype": _str,
    "mamba_spec_boundary_states": _str,
    "enable_prefix_caching": _bool,
    "enable_chunked_prefill": _bool,
    "disable_eagle_block_drop": _bool,
    "scheduler_reserve_full_isl": _bool,
    "prefix_cache_retention_interval": _retention,
    "no_spec": _bool,
    "replicas": _replicas,
    "router": _str,
    "overlap_weight": _float(0),
    "ttft_slo_ms": _float(0, strict_minimum=True),
    "router_view": _str,
    "kv_event_delay_ms": _float(0),
    "kv_event_loss": _float(0, 1),
    "router_max_blocks": _int(1),
    "router_ttl_s": _float(0, strict_minimum=True),
    "router_cpu_tier_weight": _float(0),
    "router_storage_tier_weight": _float(0),
    "kv_offloading_size": _float(0),
    "kv_offload_store_threshold": _int(0),
    "kv_offload_prompt_only": _bool,
    "kv_offload_slot_sizing": _str,
    "kv_offload_load_gbps": _float(0, strict_minimum=True),
    "kv_offload_store_gbps": _float(0, strict_minimum=True),
}

# Trace shaping (the CLI's "trace shaping" flags).
TRACE_OPTIONS = {
    "trace_format": _str,
    "trace_block_tokens": _int(1, 1 << 30),
    "max_requests": _int(0),
    "trace_start_s": _float(0),
    "trace_end_s": _float(0),
    "time_scale": _float(0, strict_minimum=True),
    "session_sample": _float(0, 1, strict_minimum=True),
    "strict_arrival_order": _bool,
}

# How a replay runs (the other replay flags; miss_causes and fast_path are the CLI's
# --no-miss-causes and --no-fast-path the right way round).
REPLAY_OPTIONS = {
    "seed": _int(0, (1 << 64) - 1),
    "active_params": _float(0),
    "hit_rate_window": _int(1),
    "check_invariants": _bool,
    "check_invariants_every": _int(0),
    "miss_causes": _bool,
    "miss_causes_memory_mb": _int(0, 1 << 40),
    "threads": _int(0, 1 << 16),
    "max_preemptions_without_finish": _int(0),
    "max_steps_without_finish": _int(0),
    "fast_path": _bool,
}


def split(function, options, *tables):
    """Checks `options` against the tables; returns one dict of checked values per table. An
    unknown keyword is a TypeError, as Python's own, with the closest known names."""
    known = {}
    for table in tables:
        known.update(table)
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}{hint}")
    out = []
    for table in tables:
        checked = {}
        for name, value in options.items():
            # None leaves a setting as the engine (or the default) has it.
            if name in table and value is not None:
                checked[name] = table[name](name, value)
        out.append(checked)
    return out


_FLAG = re.compile(r"(?:flag )?--([a-z][a-z0-9-]*)")
_RECORD_LINE = re.compile(r"\brecords:(\d+):")


def keyword_message(message):
    """A library message in the keywords' names: "flag --max-requests" and "--max-requests" become
    "`max_requests`", "records:4:" (the line of a record) becomes "records[3]:"."""
    message = _FLAG.sub(lambda m: "`" + m.group(1).replace("-", "_") + "`", message)
    return _RECORD_LINE.sub(lambda m: f"records[{int(m.group(1)) - 1}]:", message)
