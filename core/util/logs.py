"""Keep ONNX Runtime's Python-side log records off the user's root logger, for a while only.

ORT's quantization tools log advice on the *root* logger. The core never prints, yet must not
change logging for the program that called it (a training script keeps its own logging): so
`quiet_onnxruntime_records()` adds a filter only while a block runs and removes it after.
`held_records(name)` keeps a library logger's records (torch.export logs a whole traceback as a
warning before raising "check the warnings above") in a list while a block runs, off stderr.
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


class _Keep(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.DEBUG)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def held_records(name: str) -> Iterator[list[logging.LogRecord]]:
    """The records logger `name` (and its children) emit while inside, kept in the list yielded
    instead of reaching any handler (torch gives its loggers stderr handlers of their own); the
    logger is as it was after."""
    logger = logging.getLogger(name)
    records: list[logging.LogRecord] = []
    handlers, propagate = logger.handlers, logger.propagate
    logger.handlers, logger.propagate = [_Keep(records)], False
    try:
        yield records
    finally:
        logger.handlers, logger.propagate = handlers, propagate


def logged_exception(records: list[logging.LogRecord]) -> BaseException | None:
    """The exception the last record that carries one was logged with, if any: its first cause
    (`raise ... from`), the one that says what was wrong."""
    for record in reversed(records):
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            seen = {id(exc)}
            while exc.__cause__ is not None and id(exc.__cause__) not in seen:
                exc = exc.__cause__
                seen.add(id(exc))
            return exc
    return None
