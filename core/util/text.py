"""Small text helpers for one-line messages and terminal output."""

from __future__ import annotations


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (its type's name when it has none), `clipped` to
    `limit`."""
    text = str(exc).strip()
    return clipped(text.splitlines()[0], limit) if text else type(exc).__name__


def clipped(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, keeping its end: an error's reason comes last
    ("Load model from <long path> failed: ... Unsupported model IR version: 99"), so a long one
    loses its middle ("head ... reason"), never its reason."""
    if len(text) <= limit:
        return text
    tail = max(limit * 2 // 3, limit - 120)
    return text[:max(limit - tail - 5, 0)].rstrip() + " ... " + text[len(text) - tail:].lstrip()


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


def shown(text: str) -> str:
    """`text` (a name or a line holding names read from a file) safe to print on a terminal:
    every character Python does not count printable (C0 and C1 controls such as ESC and BEL,
    newlines, DEL, bidi overrides such as U+202E, other format and separator characters, lone
    surrogates) becomes its repr-style escape (\\x1b, \\n, \\u202e); the rest is left as it is.
    The one function the CLI passes such text through before it prints it."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def shown_lines(lines) -> str:
    """`lines` (each may hold names from a file) as one printable block: each `shown`, joined by newlines."""
    return "\n".join(shown(line) for line in lines)


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(c: str) -> str:
    code = ord(c)
    if c in _NAMED:
        return _NAMED[c]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
