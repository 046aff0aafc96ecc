"""The `trace` argument: a path (any format and compression the CLI reads), or records (an
iterable of dicts, a DataFrame's rows) in one of the JSON trace formats (traces/README.md), which
the library parses from memory, exactly as it parses a file's lines."""

import errno
import json
import math
import numbers
import os


def _json_default(value):
    """NumPy scalars and arrays (a DataFrame's cells) as the JSON values they stand for."""
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _is_missing(value):
    # A DataFrame's empty cell (NaN) is a field the record does not have.
    return isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) and \
        math.isnan(value)


def _record_line(index, record):
    if isinstance(record, str):  # a record already as JSON text
        if "\n" in record.strip():
            raise ValueError(f"`trace`: records[{index}] is JSON text over several lines")
        return record.strip()
    if not hasattr(record, "items"):
        raise ValueError(f"`trace`: records[{index}] must be a dict of a trace format's fields "
                         f"(traces/README.md), got {type(record).__name__}")
    fields = {str(k): v for k, v in record.items() if not _is_missing(v)}
    try:
        return json.dumps(fields, default=_json_default, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise ValueError(f"`trace`: records[{index}]: {e}") from None


def _rows(trace):
    """The records of a DataFrame (its rows, as dicts) or of any other iterable."""
    if hasattr(trace, "to_dict") and hasattr(trace, "columns"):
        return trace.to_dict(orient="records")
    return trace


def resolve(trace):
    """What the native half takes: a path as str, or the records as bytes of JSON lines."""
    if isinstance(trace, (str, os.PathLike)):
        path = os.fspath(trace)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, "no such file (`trace`)", path)
        if os.path.isdir(path):
            raise ValueError(f"`trace`: {path} is a directory, not a trace file")
        return path
    if isinstance(trace, (bytes, bytearray)):
        raise ValueError("`trace` must be a path or records (dicts), not bytes")
    try:
        rows = iter(_rows(trace))
    except TypeError:
        raise ValueError(f"`trace` must be a path or an iterable of records (dicts), got "
                         f"{type(trace).__name__}") from None
    lines = [_record_line(i, r) for i, r in enumerate(rows)]
    if not lines:
        raise ValueError("`trace`: no records")
    return ("\n".join(lines) + "\n").encode()
