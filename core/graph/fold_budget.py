"""What constant folding may still add to a model and still do, from the model's own size.

See `budgets` for the limits and why. `FoldBudget.for_constants(bytes)` starts a pass; before
folding a node the folder asks `allows(growth, work)` (growth: bytes its output adds minus the
inputs it makes unused; work: bytes read or computed to produce it, now or at write time), then
`spend`s them. `take_eager(n)` reserves memory for a small output computed at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from onnxport.core.util.budgets import (
    FOLD_EAGER_MAX,
    FOLD_EAGER_TOTAL,
    FOLD_GROWTH_FACTOR,
    FOLD_GROWTH_FLOOR,
    FOLD_OUTPUT_FACTOR,
    FOLD_OUTPUT_FLOOR,
    FOLD_WORK_FACTOR,
    FOLD_WORK_FLOOR,
)


def output_allowed(out_bytes: int, distinct_input_bytes: int) -> bool:
    """One folded output may be at most max(floor, factor x the bytes of its distinct inputs)."""
    return out_bytes <= max(FOLD_OUTPUT_FLOOR, FOLD_OUTPUT_FACTOR * distinct_input_bytes)


@dataclass
class FoldBudget:
    growth: int  # bytes the model's constants may still grow by
    work: int  # bytes folding may still read or compute
    eager: int = FOLD_EAGER_TOTAL  # bytes of small outputs that may still be held in memory

    @classmethod
    def for_constants(cls, constant_bytes: int) -> FoldBudget:
        return cls(growth=max(FOLD_GROWTH_FLOOR, FOLD_GROWTH_FACTOR * constant_bytes),
                   work=max(FOLD_WORK_FLOOR, FOLD_WORK_FACTOR * constant_bytes))

    def allows(self, growth: int, work: int) -> bool:
        return growth <= self.growth and work <= self.work

    def spend(self, growth: int, work: int) -> None:
        self.growth -= growth
        self.work -= work

    def take_eager(self, nbytes: int) -> bool:
        """Reserve memory for a small value computed now; False if it is too big or memory is spent."""
        if nbytes > FOLD_EAGER_MAX or nbytes > self.eager:
            return False
        self.eager -= nbytes
        return True
