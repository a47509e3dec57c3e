"""int4 with an accuracy target: each weight in 4 bits, 8 bits or float, the fewest bytes that meet it.

Why: a few weights lose most in 4 bits; 8 bits cost 1.8x the bytes for ~16x less rounding error,
so moving those to 8 bits keeps most of int4's size. Measured on the model's outputs: a node's own
added error misleads (MiniLM's embeddings change most in 4 bits; its output hardly moves).

Contract: `bits_loop(write, sizes, stage, name, prepared, feeds, excluded, thresholds, nodes, report,
verdict)`: every node of `nodes` in 4 bits first (`write(bits, dst)`, bits 0 = float); with
`verdict` (the held-out check) that attempt, tuned on nothing, is judged there at once. Else, per
step (4 -> 8, then 8 -> float), each group of nodes (one role in every numbered layer, or one
node; `MAX_GROUPS` largest) is measured alone one step up on the search part, and the groups that
gain are taken, best gain per byte (`sizes`: node -> values) first, until the search part meets the
target with `search.SEARCH_MARGIN`. Returns `LoopResult`: `kept` the float nodes, `search["bits"]`
node -> 4, 8 or 0, `search["moved"]` each group moved with what it gained (what the report says).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from onnxport.core.evaluate.compare import Thresholds
from onnxport.core.evaluate.feeds import FeedSource
from onnxport.core.evaluate.validate import ValidationReport
from onnxport.core.export.staging import Staging
from onnxport.core.quantize.attempt_check import AttemptChecker, attempt_record
from onnxport.core.quantize.search import SEARCH_MARGIN, LoopResult
from onnxport.core.util.progress import Reporter

MAX_GROUPS = 24  # groups measured per step (the largest by values)
STEPS = ((4, 8), (8, 0))  # 4 -> 8 bits, then 8 bits -> float
BYTES_PER_VALUE = {4: 0.64, 8: 1.16, 0: 4.0}  # with a float scale and a zero point per block of 32
WriteBits = Callable[[dict[str, int], Path], None]


def role_groups(nodes: list[str]) -> dict[str, list[str]]:
    """Nodes grouped by role: the same name up to layer numbers ('/encoder/layer.*/output/dense/MatMul')."""
    number = re.compile(r"(?<=[./_])\d+(?=[./_]|$)")
    groups: dict[str, list[str]] = {}
    for node in nodes:
        groups.setdefault(number.sub("*", node), []).append(node)
    return groups


class _Run:
    """One search's state: the widths, the attempts written and checked, the moves made."""

    def __init__(self, write: WriteBits, stage: Staging, name: str, checker: AttemptChecker | None,
                 bits: dict[str, int]) -> None:
        self.write, self.stage, self.name, self.checker, self.bits = write, stage, name, checker, bits
        self.attempts: list[dict] = []
        self.moved: list[dict] = []
        self.count = 0
        self.best: tuple[Path, dict[str, int]] | None = None

    def attempt(self, bits: dict[str, int]) -> Path:
        folder = self.stage.path(f"attempt{self.count}")
        self.count += 1
        folder.mkdir()
        dst = folder / self.name
        self.write(dict(bits), dst)
        return dst

    def score(self, bits: dict[str, int], keep: bool = False) -> tuple[float, bool]:
        """(min cosine on the search part, met) of a model with `bits`; kept as the answer if `keep`."""
        assert self.checker is not None
        dst = self.attempt(bits)
        met = self.checker(dst, _float(bits), self.attempts)
        cosine = self.attempts[-1]["min_cosine"]
        if keep:
            if self.best is not None:
                shutil.rmtree(self.best[0].parent, ignore_errors=True)
            self.best = (dst, dict(bits))
        else:
            shutil.rmtree(dst.parent, ignore_errors=True)
        return cosine, met

    def result(self, met: bool) -> LoopResult:
        assert self.best is not None
        path, bits = self.best
        return LoopResult(path, _float(bits), self.attempts, met, {"bits": bits, "moved": self.moved})


def bits_loop(write: WriteBits, sizes: dict[str, int], stage: Staging, name: str, prepared: Path,
              feeds: FeedSource, excluded: list[str], thresholds: Thresholds | None, nodes: list[str],
              report: Reporter, verdict: Callable[[Path], ValidationReport] | None = None) -> LoopResult:
    """See the module docstring (`thresholds` None: one attempt, every node in 4 bits, unchecked)."""
    bits = {n: 4 for n in nodes if n not in set(excluded)}
    checker = AttemptChecker(prepared, feeds, thresholds, stage.dir) if thresholds is not None else None
    run = _Run(write, stage, name, checker, bits)
    report.check()
    report(0.0, "quantizing")
    first = run.attempt(bits)
    run.best = (first, dict(bits))
    if thresholds is None:
        return run.result(True)
    if verdict is not None:
        final = verdict(first)
        run.attempts.append(attempt_record(first, [], final.outputs, final.passed, final.failures(),
                                           inputs="held out"))
        if final.passed:
            outcome = run.result(True)
            outcome.final = final
            return outcome
    cosine, met = run.score(bits, keep=True)
    aim = thresholds.min_cosine + SEARCH_MARGIN * (1.0 - thresholds.min_cosine)
    for step, (old, new) in enumerate(STEPS):
        if met and cosine >= aim:
            break
        cosine, met = _step(run, sizes, old, new, cosine, aim, report.sub(step / 2, (step + 1) / 2))
    return run.result(met)


def _step(run: _Run, sizes: dict[str, int], old: int, new: int, cosine: float, aim: float,
          report: Reporter) -> tuple[float, bool]:
    """Measure each group one step up alone, then take the gaining ones, best per byte, until `aim`."""
    groups = role_groups([n for n, b in run.bits.items() if b == old])
    largest = sorted(groups, key=lambda k: -sum(sizes.get(n, 0) for n in groups[k]))[:MAX_GROUPS]
    base = cosine
    gains: list[tuple[float, str, float]] = []
    for i, key in enumerate(largest):
        report.check()
        report(i / (2 * max(len(largest), 1)), f"measuring {key} in {_width(new)}")
        got, _ = run.score({**run.bits, **{n: new for n in groups[key]}})
        cost = sum(sizes.get(n, 0) for n in groups[key]) * (BYTES_PER_VALUE[new] - BYTES_PER_VALUE[old])
        if got > cosine:
            gains.append(((got - cosine) / max(cost, 1.0), key, got))
    met = False
    for _, key, alone in sorted(gains, reverse=True):
        report.check()
        report(0.5, f"quantizing again with {key} in {_width(new)}")
        run.bits.update({n: new for n in groups[key]})
        before = cosine
        cosine, met = run.score(run.bits, keep=True)
        run.moved.append({"group": key, "nodes": len(groups[key]), "from": old, "to": new,
                          "cosine_base": round(base, 6), "cosine_alone": round(alone, 6),
                          "cosine_before": round(before, 6),
                          "cosine_after": round(cosine, 6)})
        if met and cosine >= aim:
            break
    return cosine, met


def _float(bits: dict[str, int]) -> list[str]:
    return [n for n, b in bits.items() if b == 0]


def _width(bits: int) -> str:
    return "float" if bits == 0 else f"{bits} bits"


def describe(search: dict) -> list[str]:
    """The report's lines: how many weights in each width, and why each group moved up."""
    bits = search.get("bits") or {}
    if not bits:
        return []
    counts = {b: sum(v == b for v in bits.values()) for b in (4, 8, 0)}
    lines = [f"int4 search: {counts[4]} weight(s) in 4 bits, {counts[8]} in 8 bits, {counts[0]} in float"]
    for m in search.get("moved", []):
        lines.append(f"{m['group']} ({m['nodes']} node(s)): {_width(m['from'])} -> {_width(m['to'])}, measured "
                     f"alone: min cosine {m['cosine_base']:.4f} -> {m['cosine_alone']:.4f}; taken: "
                     f"{m['cosine_before']:.4f} -> {m['cosine_after']:.4f}")
    return lines
