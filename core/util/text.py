"""Small text helpers for one-line messages."""

from __future__ import annotations


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (its type's name when it has none), cut to `limit`."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__
