"""prefixsim from Python: the simulator of prefix-cache hit rates in LLM serving engines, run
in-process, with results as pandas DataFrames (docs/python.md).

    import prefixsim
    plan = prefixsim.resolve("kimi-k3-like", "kimi-k3-dspark", "new")
    result = prefixsim.replay("traces/sample_chat.jsonl", "kimi-k3-like", "kimi-k3-dspark", "new")
    result.summary["prefix_cache"]["hit_rate"], result.requests.head()
    ab = prefixsim.compare("traces/sample_chat.jsonl", "kimi-k3-like", "kimi-k3-dspark",
                           policies=["old", "new"])
    ab.deltas, ab.to_html("ab.html")

The numbers are the CLI's: the same engine, and `to_json()` is `prefixsim replay --json`.
"""

import os as _os

# An installed package carries the presets (configs/) in its share/ folder: the library looks
# there unless the user points PREFIXSIM_CONFIG_DIR elsewhere (docs/embedding.md lists the roots).
# In a build tree there is no share/ here, and the library finds the source tree's presets.
_share = _os.path.join(_os.path.dirname(__file__), "share")
if not _os.environ.get("PREFIXSIM_CONFIG_DIR") and _os.path.isdir(_share):
    _os.environ["PREFIXSIM_CONFIG_DIR"] = _share
del _share

from ._api import (ReplayInterrupted, analyze, compare, gen_trace, policies, replay, resolve,
                   trace_formats)
from ._results import AnalyzeResult, Comparison, Plan, ReplayResult

__all__ = [
    "resolve", "replay", "compare", "analyze", "gen_trace", "policies", "trace_formats",
    "Plan", "ReplayResult", "Comparison", "AnalyzeResult", "ReplayInterrupted",
]
