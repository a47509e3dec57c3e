"""JSON from a stranger's file, parsed only once its size and nesting are known to be bounded.

Why: Python's json parser recurses once per level: a config.json, tokenizer_config.json,
tokenizer.json or modules.json nested 5,000-200,000 deep raised RecursionError, in onnxport and
in transformers, which parses a model folder's files itself. Real files nest under 20 levels.
Contract: `json_depth(data)` is the deepest nesting of arrays and objects (brackets inside strings
do not count), found without parsing; `load_json(data, label)` parses UTF-8 bytes of at most
JSON_DEPTH_MAX levels; `read_json(path, max_bytes)` reads a regular file of at most `max_bytes`
and parses it; `check_json_file(path, max_bytes)` checks a file another library will parse.
Each refuses with one `OnnxportError` naming the file (or `label`).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np

from onnxport.core.util.budgets import JSON_DEPTH_MAX, human_bytes
from onnxport.core.util.errors import OnnxportError, cannot_read


def _real_quotes(marks: np.ndarray) -> np.ndarray:
    """Positions of the quotes that open or close strings (not escaped by an odd run of backslashes)."""
    quotes = np.flatnonzero(marks == ord('"'))
    slashes = np.flatnonzero(marks == ord("\\"))
    if not slashes.size:
        return quotes
    starts = np.flatnonzero(np.diff(slashes, prepend=-2) != 1)  # each run of backslashes
    ends = np.append(starts[1:], slashes.size) - 1
    odd_ends = slashes[ends][(ends - starts) % 2 == 0]  # last position of each odd-length run
    return quotes[~np.isin(quotes - 1, odd_ends)]


def json_depth(data: bytes) -> int:
    """The deepest nesting of `data`'s arrays and objects (0 for a bare value); vectorised over
    the positions of quotes, backslashes and brackets only."""
    marks = np.frombuffer(data, np.uint8)
    opens = np.flatnonzero((marks == ord("[")) | (marks == ord("{")))
    closes = np.flatnonzero((marks == ord("]")) | (marks == ord("}")))
    if not opens.size:
        return 0
    quotes = _real_quotes(marks)
    where = np.concatenate([opens, closes])
    steps = np.concatenate([np.ones(opens.size, np.int64), -np.ones(closes.size, np.int64)])
    outside = np.searchsorted(quotes, where) % 2 == 0  # an even number of quotes before: not in a string
    order = np.argsort(where[outside], kind="stable")
    return max(int(np.cumsum(steps[outside][order]).max(initial=0)), 0)


def _depth_problem(data: bytes) -> str | None:
    depth = json_depth(data)
    return f"JSON nested {depth} levels deep (at most {JSON_DEPTH_MAX})" if depth > JSON_DEPTH_MAX else None


def load_json(data: bytes, label: str | os.PathLike):
    """See the module docstring."""
    problem = _depth_problem(data)
    if problem is not None:
        raise OnnxportError(f"{label}: {problem}; refused")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise OnnxportError(f"{label}: not readable JSON ({type(exc).__name__}: {str(exc)[:120]})") from None


def _read(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes` (opened without blocking: never a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise cannot_read(path, exc) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OnnxportError(f"{path}: not a regular file")
        if st.st_size > max_bytes:
            raise OnnxportError(f"{path}: {human_bytes(st.st_size)}, over the {human_bytes(max_bytes)} onnxport "
                                "reads of a JSON file")
        try:
            data = f.read(max_bytes + 1)
        except OSError as exc:
            raise cannot_read(path, exc) from None
    if len(data) > max_bytes:
        raise OnnxportError(f"{path}: grew past {human_bytes(max_bytes)} while it was read")
    return data


def read_json(path: str | os.PathLike, max_bytes: int):
    """See the module docstring."""
    path = Path(path)
    return load_json(_read(path, max_bytes), path)


def check_json_file(path: str | os.PathLike, max_bytes: int) -> None:
    """See the module docstring: the file's size and nesting (not its syntax: the library says that)."""
    path = Path(path)
    problem = _depth_problem(_read(path, max_bytes))
    if problem is not None:
        raise OnnxportError(f"{path}: {problem}; refused")
