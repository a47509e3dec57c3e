"""Two models timed interleaved (A B B A) and compared block by block, on a clock the test drives.

No wall-clock figure is asserted: a fake clock advances by what each fake run "costs", so the
order of runs and the verdict follow from the structure alone, on any machine under any load.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxport.core.evaluate.timing import (
    interleaved,
    median_interval_rank,
    paired_ratio,
)


class DriftingMachine:
    """A clock, and runs whose cost grows by `drift` with every run anyone makes (a machine that
    slows down as load builds up); `factor[k]` scales model k's cost. Dyadic numbers: exact sums."""

    def __init__(self, factor=(1.0, 1.0), base=2.0**-10, drift=2.0**-16):
        self.now, self.count, self.order = 0.0, 0, []
        self.factor, self.base, self.drift = factor, base, drift

    def clock(self) -> float:
        return self.now

    def run(self, k: int):
        def once() -> None:
            self.order.append(k)
            self.now += self.factor[k] * (self.base + self.drift * self.count)
            self.count += 1
        return once

    def measure(self, blocks: int, repeats=(1, 1)) -> list[list[float]]:
        return interleaved([self.run(0), self.run(1)], list(repeats), budget=1e9, min_blocks=blocks,
                           max_blocks=blocks, clock=self.clock)


def test_the_two_models_alternate_in_abba_blocks():
    machine = DriftingMachine()
    times = machine.measure(blocks=3, repeats=(2, 1))
    assert machine.order == [0, 0, 1, 1, 0, 0] * 3  # A B B A per block, each sample `repeat` runs
    assert [len(t) for t in times] == [6, 6]  # two samples per model per block


def test_a_model_against_itself_on_a_drifting_machine_is_no_difference():
    """The same cost for both, on a machine slowing down run by run: B always after A (the old
    order) read B slower; in A B B A blocks a linear drift cancels exactly, so every block's ratio
    is 1 and the interval holds 1.0, however large the drift."""
    machine = DriftingMachine(drift=2.0**-12)
    a, b = machine.measure(blocks=40)
    ratio = paired_ratio(a, b)
    assert ratio.median == ratio.low == ratio.high == 1.0 and ratio.blocks == 40
    assert ratio.difference is None and ratio.verdict().startswith("no measurable difference")
    assert b[0] > a[0] and b[1] < a[1]  # the drift is there: the later of each pair is slower


def test_a_model_twice_as_fast_is_named_with_its_interval():
    machine = DriftingMachine(factor=(2.0, 1.0))
    ratio = paired_ratio(*machine.measure(blocks=20))
    assert ratio.difference == "faster" and ratio.high < 1.0
    assert ratio.verdict().startswith("2.00x faster") or ratio.verdict().startswith("1.99x faster")
    slower = paired_ratio(*DriftingMachine(factor=(1.0, 2.0)).measure(blocks=20))
    assert slower.difference == "slower" and slower.low > 1.0 and "slower" in slower.verdict()


def test_noise_both_ways_is_no_measurable_difference():
    """Blocks that disagree (some say faster, some slower) give an interval over 1.0."""
    a = [1.0] * 40
    b = [0.5, 0.5, 2.0, 2.0] * 10  # block ratios alternate 0.5 and 2.0
    ratio = paired_ratio(a, b)
    assert ratio.low == 0.5 and ratio.high == 2.0 and ratio.difference is None


def test_the_interval_is_the_binomial_order_statistic_one():
    assert median_interval_rank(10, 0.95) == (1, pytest.approx(1 - 2 * 11 / 1024))  # x(2)..x(9), 1-based
    assert median_interval_rank(5, 0.95) == (0, pytest.approx(1 - 2 / 32))  # too few: the whole range
    k, coverage = median_interval_rank(5000, 0.95)
    assert coverage >= 0.95 and median_interval_rank(5000, 0.95)[0] == k and abs(k - (2500 - 1.96 * 35.36)) < 3
    a = np.ones(20)
    b = np.repeat(np.arange(1.0, 11.0), 2)  # block ratios 1..10
    r = paired_ratio(list(a), list(b))
    assert (r.low, r.median, r.high) == (2.0, 5.5, 9.0)
