"""Keep Python's cycle collector quiet while a job builds a big, long-lived structure.

Why: the collector runs full collections while such a structure grows (a 100,000-tensor index,
its tree), each one holding the GIL for a walk of every object tracked - the GUI thread
freezes although the work is in a worker. `quiet_gc()` turns automatic collection off for the
block and puts it back as it was after the outermost block ends (blocks may nest and run in
several threads). Qt-free.

Freezing the survivors (`gc.freeze()`: later collections skip them) is a lasting, process-wide
change, so only the app's entry point turns it on (`freeze_survivors()`, called from
gui/app.py `tune_process`); tests and scripts that build a window themselves leave it off. What
is built in the block must be acyclic (the index and `TreeNode` trees are), so reference counting
still frees it when the next model replaces it, frozen or not.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = True
_freeze = False


def freeze_survivors(on: bool = True) -> None:
    """Make the end of each outermost `quiet_gc` block freeze what survives it (the entry point's choice)."""
    global _freeze
    _freeze = on


@contextmanager
def quiet_gc() -> Iterator[None]:
    """No automatic collection inside the block; see the module docstring."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if _freeze:
                    gc.freeze()
                if _was_enabled:
                    gc.enable()
