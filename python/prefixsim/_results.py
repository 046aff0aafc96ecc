"""What the functions return: the plan, a replay's result, a comparison, an analysis. Summaries
are the CLI's JSON reports as dicts (docs/design.md §4.5); tables are pandas DataFrames built on
first use and kept."""

import functools
import json
import os
import tempfile

from . import _core


def _frame(rows, columns=None):
    import pandas as pd  # only where a frame is asked for: `import prefixsim` needs no pandas

    return pd.DataFrame(rows, columns=columns)


def _write_text(path, text):
    """Writes whole or not at all (a temporary file, then renamed), as the CLI writes outputs."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".prefixsim-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


class Plan:
    """The KV cache plan of a model and engine under a block-size policy (`prefixsim resolve`).

    Attributes: policy, groups (a list of dicts: kind, num_layers, block_size, page_bytes, ...),
    S (scheduler block size), H (hash block size), A (hit alignment), num_blocks, startup_check
    (vLLM's startup memory check: performed, ok, message, max_fitting_model_len), warnings."""

    def __init__(self, native):
        self._dict = json.loads(native["json"])
        self._text = native["text"]
        self.model = native["model"]
        self.engine = native["engine"]
        self.assumptions = list(native["assumptions"])
        self.policy = self._dict["policy"]
        self.groups = self._dict["groups"]
        self.S = self._dict["scheduler_block_size"]
        self.H = self._dict["hash_block_size"]
        self.A = self._dict["hit_alignment"]
        self.num_blocks = self._dict["num_blocks"]
        self.startup_check = self._dict["startup_check"]
        self.warnings = self._dict["warnings"]

    def to_dict(self):
        """The plan as `prefixsim resolve --json` prints it."""
        return json.loads(json.dumps(self._dict))

    @property
    def groups_frame(self):
        """The groups as a DataFrame, one row per KV cache group."""
        return _frame(self.groups)

    def __str__(self):
        return self._text

    def __repr__(self):
        return (f"<prefixsim.Plan {self.policy}: {len(self.groups)} groups, S={self.S}, "
                f"H={self.H}, A={self.A}, num_blocks={self.num_blocks}>")


class ReplayResult:
    """One replay (`prefixsim replay`).

    summary   -- the JSON summary as a dict (`replay --json`)
    requests  -- a DataFrame with the columns of `replay --csv`, one row per request
    groups    -- a DataFrame of the plan's KV cache groups
    replicas  -- a DataFrame of the fleet's replicas (one row for a single engine)
    miss_causes -- tokens by miss cause over first admissions (a pandas Series)
    partial   -- True when Ctrl-C stopped the replay (the figures cover what was simulated)
    """

    def __init__(self, native):
        self._native = native
        self.policy = native.policy
        self.partial = native.partial

    @functools.cached_property
    def summary(self):
        return json.loads(self._native.json(True))

    @property
    def hit_rate(self):
        """vLLM's token-level prefix-cache hit rate over the whole replay."""
        return self.summary["prefix_cache"]["hit_rate"]

    def to_json(self, include_wall_time=True):
        """The text of `prefixsim replay --json` (with `include_wall_time=False`, of
        `--no-wall-time`: byte-identical across runs)."""
        return self._native.json(include_wall_time)

    def to_csv(self, path=None):
        """The text of `prefixsim replay --csv`; written to `path` when given."""
        self._need_requests()
        text = self._native.csv()
        if path is None:
            return text
        _write_text(path, text)
        return None

    def to_html(self, path, capacities=None):
        """The report page of `prefixsim replay --html` (`capacities`: KV cache sizes, bytes or
        '64GiB', replayed once more each for the hit-rate-against-size chart)."""
        self._need_requests()
        _core.write_html([self._native], os.fspath(path), "replay", False,
                         _capacities(capacities))

    @property
    def text(self):
        """The readable summary `prefixsim replay` prints."""
        return self._native.text(True)

    def __str__(self):
        return self.text

    def __repr__(self):
        partial = ", partial" if self.partial else ""
        return f"<prefixsim.ReplayResult {self.policy}: hit rate {self.hit_rate:.4f}{partial}>"

    def _need_requests(self):
        if not self._native.has_requests and self.summary["requests"] > 0:
            raise ValueError("this replay kept no per-request records (replay(..., "
                             "requests=False)); replay with requests=True for them")

    @functools.cached_property
    def requests(self):
        self._need_requests()
        return _request_frame(self._native.request_columns())

    @functools.cached_property
    def groups(self):
        return _frame(self.summary["kv_plan"]["groups"])

    @functools.cached_property
    def replicas(self):
        fleet = self.summary.get("fleet")
        if fleet is not None:
            return _frame(fleet["per_replica"])
        s = self.summary
        return _frame([{
            "replica": 0,
            "requests": s["requests"],
            "finished_requests": s["finished_requests"],
            "hit_rate": s["prefix_cache"]["hit_rate"],
            "preemptions": s["preemptions"],
            "evicted_blocks": s["evicted_blocks"],
            "mean_kv_usage": s["mean_kv_usage"],
        }])

    @functools.cached_property
    def miss_causes(self):
        import pandas as pd

        causes = self.summary.get("miss_causes")
        if causes is None:
            return pd.Series(dtype="int64", name="tokens")
        return pd.Series(causes["first_admissions"]["tokens_by_cause"], name="tokens")


def _request_frame(columns):
    import numpy as np
    import pandas as pd

    data = {}
    for name, column in columns.items():
        if not isinstance(column, tuple):
            data[name] = column
            continue
        values, extra = column
        if values.dtype == np.int8:  # codes and categories; -1 is an empty cell
            data[name] = pd.Categorical.from_codes(values, categories=list(extra))
        else:  # integers with a mask of empty cells (pandas' nullable integers)
            data[name] = pd.arrays.IntegerArray(values, extra.copy())
    return pd.DataFrame(data, copy=False)


def _capacities(capacities):
    from ._options import _byte_size

    if capacities is None:
        return []
    if isinstance(capacities, (str, int)):
        capacities = [capacities]
    return [_byte_size("capacities", c) for c in capacities]


class Comparison:
    """Several policies on one trace (`prefixsim compare`), deltas against the first.

    results -- {policy: ReplayResult}, in the order given
    summary -- the comparison JSON as a dict (`compare --json`)
    deltas  -- a DataFrame, one row per policy after the first: its figures minus the first's
    """

    def __init__(self, natives):
        self._natives = natives
        self.results = {n.policy: ReplayResult(n) for n in natives}
        self.partial = any(n.partial for n in natives)

    def __getitem__(self, policy):
        return self.results[policy]

    @functools.cached_property
    def summary(self):
        return json.loads(_core.comparison_json(self._natives, True))

    @functools.cached_property
    def deltas(self):
        import pandas as pd

        return pd.json_normalize(self.summary["deltas"])

    def to_json(self, include_wall_time=True):
        """The text of `prefixsim compare --json` (`include_wall_time=False`: `--no-wall-time`)."""
        return _core.comparison_json(self._natives, include_wall_time)

    def to_html(self, path, capacities=None):
        """The A/B report page of `prefixsim compare --html` (`capacities` as in
        ReplayResult.to_html)."""
        for r in self.results.values():
            r._need_requests()
        _core.write_html(self._natives, os.fspath(path), "compare", True, _capacities(capacities))

    @property
    def text(self):
        """The side-by-side table `prefixsim compare` prints."""
        return _core.comparison_text(self._natives)

    def __str__(self):
        return self.text

    def __repr__(self):
        rates = ", ".join(f"{p} {r.hit_rate:.4f}" for p, r in self.results.items())
        return f"<prefixsim.Comparison {rates}>"


class AnalyzeResult:
    """What a trace allows at best, independent of an engine (`prefixsim analyze`).

    summary         -- the JSON report as a dict (`analyze --json`)
    alignment_curve -- DataFrame: upper-bound hit rate per hit alignment
    capacity_curve  -- DataFrame: LRU and optimal hit rate per capacity (blocks)
    """

    def __init__(self, json_text, text):
        self._json = json_text
        self.text = text

    @functools.cached_property
    def summary(self):
        return json.loads(self._json)

    @functools.cached_property
    def alignment_curve(self):
        return _frame(self.summary.get("alignment_curve", []))

    @functools.cached_property
    def capacity_curve(self):
        return _frame(self.summary.get("capacity_curve", []))

    def to_json(self):
        """The text of `prefixsim analyze --json`."""
        return self._json + "\n"

    def __str__(self):
        return self.text

    def __repr__(self):
        s = self.summary
        return (f"<prefixsim.AnalyzeResult {s.get('requests')} requests, "
                f"max hit rate {s.get('max_hit_rate')}>")
