"""A big graph's shapes, inferred after its tree was shown: waited for and filled in side jobs.

The open returns before a big graph's shape inference ends (`index.pending_types`); the child is
waited for outside the side jobs' lane (it only waits), the answer parsed inside it (Python
work), and `shown(model)` repaints what shows the shapes, if that model is still the one shown.
"""

from __future__ import annotations

from collections.abc import Callable

from . import core_calls
from .runner import JobRunner


def fill_types_later(runner: JobRunner, index, model, shown: Callable[[object], None]) -> None:
    """Start filling `index`'s pending shapes for the tree `model`; or drop the previous model's."""
    if index.pending_types is None:
        runner.drop("types")  # the previous model's, if still inferring
        return

    def fill(_none) -> None:
        runner.side("types", core_calls.types_job(index), lambda _n: shown(model))

    runner.side("types", core_calls.types_wait_job(index), fill, serial=False)
