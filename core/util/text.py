"""Small text helpers for one-line messages."""

from __future__ import annotations


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (its type's name when it has none), cut to `limit`."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__


_UNITS = ("B", "KB", "MB", "GB", "TB")


def human_size(n: float | None) -> str:
    """A byte count as people read it: '823 B', '1.5 KB', '12.3 MB', '2.4 GB' (1 KB = 1024 B).

    The one size formatter of the CLI and the app: a fixed unit ("0.00 MB") hides small models.
    None (unknown) is '?'.
    """
    if n is None:
        return "?"
    size = float(n)
    for unit in _UNITS:
        if abs(size) < 1024 or unit == _UNITS[-1]:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} {_UNITS[-1]}"  # pragma: no cover - the loop returns
