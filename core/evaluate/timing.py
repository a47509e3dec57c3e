"""How runs are timed: runs per sample, models interleaved in ABBA blocks, a paired ratio.

`calibrate_repeat` works like timeit's autorange: the first count of 1, 2, 5, 10, 20, 50, ... runs
whose fastest of a few tries lasts at least `target` seconds (at most `cap` runs), so that a
sub-millisecond model is timed over enough runs that the timer and Python overhead do not decide
the figure. `interleaved` times two models in blocks A B B A: the order alternates, so a machine
speeding up or slowing down (a linear drift cancels exactly within a block) favours neither.
`paired_ratio` compares them block by block (B's time over A's in the same block): the median
ratio and a distribution-free 95% interval of it; an interval holding 1.0 is no measurable
difference. `spread_pct` is the p10-p90 width as a percentage of p50: small on a quiet machine.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

SAMPLE_SECONDS = 0.001  # a timed sample lasts at least this long
MAX_REPEAT = 1000  # runs per timed sample, at most
TRIES = 3  # each count is timed this many times; the fastest counts (a busy moment cannot inflate it)
BUSY_SPREAD_PCT = 20.0  # above this p10-p90 spread, the figures are rough
CONFIDENCE = 0.95  # of the paired ratio's interval
BLOCK = (0, 1, 1, 0)  # two models' order within one block of `interleaved`


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


def interleaved(runs: Sequence[Callable[[], object]], repeats: Sequence[int], *, budget: float, min_blocks: int,
                max_blocks: int, clock: Callable[[], float] = time.perf_counter,
                tick: Callable[[float, int], None] = lambda elapsed, blocks: None) -> list[list[float]]:
    """Per-run seconds of each timed sample (`repeats[k]` runs of `runs[k]`), per model, in blocks:
    A B B A for two models (sample 2i and 2i+1 of each model are block i's), A for one. Stops after
    the block at which `budget` seconds have passed (at least `min_blocks`, at most `max_blocks`
    blocks); `tick(elapsed, blocks)` after each block (progress, cancel)."""
    order = BLOCK if len(runs) == 2 else tuple(range(len(runs)))
    times: list[list[float]] = [[] for _ in runs]
    started = clock()
    blocks = 0
    while True:
        for k in order:
            run_once, repeat = runs[k], repeats[k]
            t0 = clock()
            for _ in range(repeat):
                run_once()
            times[k].append((clock() - t0) / repeat)
        blocks += 1
        elapsed = clock() - started
        if blocks >= max_blocks or (blocks >= min_blocks and elapsed >= budget):
            return times
        tick(elapsed, blocks)


@dataclass(frozen=True)
class RatioEstimate:
    """The second model's time over the first's: `median` of the per-block ratios and its
    `low`-`high` interval (`confidence`, from `blocks` paired blocks)."""

    median: float
    low: float
    high: float
    blocks: int
    confidence: float

    @property
    def difference(self) -> str | None:
        """"faster" or "slower" (the second model, beyond the interval), None: no measurable difference."""
        return "faster" if self.high < 1.0 else "slower" if self.low > 1.0 else None

    def verdict(self) -> str:
        """One phrase: how much faster or slower the second model is, with its interval."""
        if self.difference is None:
            return (f"no measurable difference (latency x{self.median:.3f}, {100 * self.confidence:.0f}% interval "
                    f"x{self.low:.3f}-{self.high:.3f} over {self.blocks} paired blocks)")
        if self.difference == "faster":
            fast, slow = 1.0 / self.median, (1.0 / self.high, 1.0 / self.low)
        else:
            fast, slow = self.median, (self.low, self.high)
        return (f"{fast:.2f}x {self.difference} ({100 * self.confidence:.0f}% interval {slow[0]:.2f}-{slow[1]:.2f}x "
                f"over {self.blocks} paired blocks)")

    def to_dict(self) -> dict:
        return {"median": round(self.median, 4), "low": round(self.low, 4), "high": round(self.high, 4),
                "blocks": self.blocks, "confidence": self.confidence, "difference": self.difference}


def paired_ratio(first: Sequence[float], second: Sequence[float], *, block: int = 2) -> RatioEstimate:
    """B over A per block of `interleaved` (the sum of B's `block` samples over A's), the median
    of those ratios and the order-statistic interval of the median (no assumption on the shape
    of the timings' distribution)."""
    n = min(len(first), len(second)) // block
    if n == 0:
        raise ValueError("no paired blocks to compare")
    ratios = sorted(sum(second[i * block:(i + 1) * block]) / sum(first[i * block:(i + 1) * block])
                    for i in range(n))
    k, confidence = median_interval_rank(n, CONFIDENCE)
    return RatioEstimate(float(np.median(ratios)), ratios[k], ratios[n - 1 - k], n, confidence)


def median_interval_rank(n: int, confidence: float) -> tuple[int, float]:
    """The largest 0-based rank k such that [x(k), x(n-1-k)] of n sorted values covers their
    median with at least `confidence` (binomial(n, 1/2) tails), and the coverage it has; 0 (the
    whole range) when none reaches it, as below 6 values for 95%."""
    def below(k: int) -> float:  # P(Binomial(n, 1/2) <= k): the median lies above x(k)
        if n > 200:  # normal approximation with continuity correction
            return 0.5 * math.erfc((n / 2 - k - 0.5) / math.sqrt(n / 2))
        return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n

    k = 0
    while k + 1 <= (n - 1) // 2 and 1 - 2 * below(k + 1) >= confidence:
        k += 1
    return k, 1 - 2 * below(k)
