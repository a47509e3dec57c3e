"""File names within what a file system stores: NAME_MAX bytes, not characters.

Why: a legal 245-byte UTF-8 name (120 two-byte characters) was refused "File name too long": the
atomic writer's temp name kept 180 *characters* of it. Temp and companion names are cut here in
bytes, never inside a character.
Contract: `kept(name, limit)`: `name` cut to at most `limit` bytes; `companion_prefix(name)`: what
the files written beside destination `name` (its external data) start with, short enough for any
companion suffix, without runs of dots (onnx.checker takes a data file named `x..y` for one
outside the folder).
"""

from __future__ import annotations

import os
import re

NAME_MAX = 255  # bytes of one file name (Linux, macOS; NTFS counts 255 UTF-16 units)
COMPANION_KEEP = NAME_MAX - len(".0123abcd.999.data")  # the destination name's bytes in a companion's


def kept(name: str, limit: int) -> str:
    """`name` cut to at most `limit` bytes as the file system stores it, never inside a character."""
    data = os.fsencode(name)
    return name if len(data) <= limit else data[:limit].decode("utf-8", "ignore")


def companion_prefix(name: str) -> str:
    """See the module docstring."""
    return re.sub(r"\.{2,}", ".", kept(name, COMPANION_KEEP)).rstrip(".") or "_"
