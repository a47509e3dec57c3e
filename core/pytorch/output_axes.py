"""Name an export's output axes after the input axes they follow.

Why: torch's exporter gives an output axis a dynamic name only when told; otherwise it declares
the traced size (`[2, 4]`) or a name of its own (`Addoutput_dim_1`), and the model then declares a
shape it does not have. So each output axis that moves when one input axis name moves gets that
name: `batch`, `seq`, as the inputs call them.

Contract: `follow_axes(forward, sizes, base, outputs) -> {output: {axis: name}}`. `forward(sizes)`
runs the model at those sizes of the named input axes and returns its output tensors (None if it
cannot run them); `base` is its result at `sizes`. An output axis that has the size of one name
at `sizes` and when that name alone is bumped by one (and moves with no other) is named after it;
the others (following several names, or a multiple of one: a flatten) are left to the exporter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def follow_axes(forward: Callable[[dict[str, int]], Sequence | None], sizes: dict[str, int], base: Sequence,
                outputs: Sequence[str]) -> dict[str, dict[int, str]]:
    moved: dict[tuple[int, int], set[str]] = {}
    for name, size in sizes.items():
        other = forward({**sizes, name: size + 1})
        if other is None or len(other) != len(base):
            continue
        for i, (a, b) in enumerate(zip(base, other)):
            if len(a.shape) != len(b.shape):
                continue
            for axis, (x, y) in enumerate(zip(a.shape, b.shape)):
                if x != y:  # it moves with `name`; it *is* that axis when it has its sizes at both runs
                    moved.setdefault((i, axis), set()).add(name if (x, y) == (size, size + 1) else "")
    axes: dict[str, dict[int, str]] = {}
    for (i, axis), names in sorted(moved.items()):
        if len(names) == 1 and "" not in names and i < len(outputs):
            axes.setdefault(outputs[i], {})[axis] = next(iter(names))
    return axes
