"""Keep ONNX Runtime's Python-side log records off the user's root logger, for a while only.

ORT's quantization tools log advice on the *root* logger. The core never prints, yet must not
change logging for the program that called it (a training script keeps its own logging): so
`quiet_onnxruntime_records()` adds a filter only while a block runs and removes it after.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

F = TypeVar("F", bound=Callable)


class _DropOnnxRuntimeRecords(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "onnxruntime" not in (record.pathname or "")


@contextmanager
def quiet_onnxruntime_records() -> Iterator[None]:
    """Drop log records emitted from onnxruntime's Python files while inside; restore after."""
    flt = _DropOnnxRuntimeRecords()
    loggers = [logging.getLogger(), logging.getLogger("onnxruntime")]
    for lg in loggers:
        lg.addFilter(flt)
    try:
        yield
    finally:
        for lg in loggers:
            lg.removeFilter(flt)


def with_quiet_onnxruntime(fn: F) -> F:
    """Decorator: run `fn` inside `quiet_onnxruntime_records()`."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with quiet_onnxruntime_records():
            return fn(*args, **kwargs)
    return wrapper  # type: ignore[return-value]
