"""How many runs make one timed sample, and how widely the samples spread.

`calibrate_repeat` works like timeit's autorange: the first count of 1, 2, 5, 10, 20, 50, ... runs
whose fastest of a few tries lasts at least `target` seconds (at most `cap` runs), so that a
sub-millisecond model is timed over enough runs that the timer and Python overhead do not decide
the figure. `spread_pct` is the p10-p90 width as a percentage of p50: small on a quiet machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np

SAMPLE_SECONDS = 0.001  # a timed sample lasts at least this long
MAX_REPEAT = 1000  # runs per timed sample, at most
TRIES = 3  # each count is timed this many times; the fastest counts (a busy moment cannot inflate it)
BUSY_SPREAD_PCT = 20.0  # above this p10-p90 spread, the figures are rough


def repeat_ladder(cap: int) -> Iterator[int]:
    """1, 2, 5, 10, 20, 50, ... below `cap`, then `cap`."""
    scale = 1
    while True:
        for step in (1, 2, 5):
            n = step * scale
            if n >= cap:
                yield cap
                return
            yield n
        scale *= 10


def calibrate_repeat(run_once: Callable[[], object], *, target: float = SAMPLE_SECONDS, cap: int = MAX_REPEAT,
                     tries: int = TRIES, clock: Callable[[], float] = time.perf_counter) -> int:
    """Runs per timed sample: the first count whose fastest of `tries` timings lasts >= `target` s."""
    for n in repeat_ladder(max(cap, 1)):
        best = min(_timed(run_once, n, clock) for _ in range(tries))
        if best >= target:
            return n
    return max(cap, 1)


def _timed(run_once: Callable[[], object], n: int, clock: Callable[[], float]) -> float:
    t0 = clock()
    for _ in range(n):
        run_once()
    return clock() - t0


def spread_pct(p10: float, p50: float, p90: float) -> float:
    """The p10-p90 width as a percentage of p50 (0 when p50 is 0)."""
    return 100.0 * (p90 - p10) / p50 if p50 > 0 else 0.0


def percentiles_ms(per_run_seconds: list[float]) -> dict[str, float]:
    """p10/p50/p90/mean/min of per-run times, in milliseconds."""
    ms = np.asarray(per_run_seconds, dtype=np.float64) * 1000.0
    p10, p50, p90 = (float(v) for v in np.percentile(ms, [10, 50, 90]))
    return {"p10": p10, "p50": p50, "p90": p90, "mean": float(ms.mean()), "min": float(ms.min())}
