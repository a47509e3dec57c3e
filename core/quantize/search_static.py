"""The accuracy search of static QDQ: which units of nodes to keep in float, measured, within a budget.

Why: a CNN quantized whole can miss the target because of a few stages, not a few nodes (figures:
docs/performance.md). The impact is *measured* on one switched model (qdq_switch.py) by unit:
segments of the quantized nodes in graph order (and the first 2, 3... together), op types, named
blocks (`search.blocks_of`), single nodes in small models (`SINGLE_NODES_UP_TO`); a unit also keeps
the quantizable producers of its inputs (`expand`). Units are measured cheapest first (share of the
weights they keep float); the first that meets the target alone ends the measuring. Otherwise they
are added by loss removed per share (+ `FREE_SHARE`), up to `MAX_FLOAT_SHARE`, until the target plus
margin is met; units the others make unnecessary are dropped. A set of float nodes runs once. The
answer is quantized for real and checked to the target plus margin, then with int8 weights for the
weights kept float (weight_only.py), kept if it still passes; if it misses, a unit chosen alone
gives way to the units holding it (measured next), else the next units follow, for at most
`MAX_ROUNDS` attempts; one that met only the target is the answer if none does better. Bounded:
`MAX_EVALUATIONS` switched runs on `search.SEARCH_BATCHES` batches; `LoopResult.search`: "capped"."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from onnxport.core.evaluate.compare import Thresholds
from onnxport.core.evaluate.feeds import FeedSource
from onnxport.core.evaluate.runtime import load_full, model_size
from onnxport.core.export.staging import Staging
from onnxport.core.graph.passes import REWRITTEN
from onnxport.core.io.model_io import load_graph
from onnxport.core.quantize.attempt_check import AttemptChecker
from onnxport.core.quantize.int4_search import describe as describe_bits
from onnxport.core.quantize.search import (
    SEARCH_BATCHES,
    SEARCH_MARGIN,
    Attempt,
    LoopResult,
    Verdict,
    attempt_file,
    blocks_of,
    search_bench,
)
from onnxport.core.quantize.weight_only import int8_weights
from onnxport.core.util.progress import Reporter

SEGMENTS = 12
SINGLE_NODES_UP_TO = 24
MAX_NAMED_BLOCKS = 16
MAX_EVALUATIONS = 64
MAX_ROUNDS = 3
FREE_SHARE = 0.02
WEIGHT_ONLY_MIN_VALUES = 1024  # smaller weights stay float: little size, the most sensitive (depthwise) kernels
BIG_MODEL_BYTES = 1536 << 20  # weight_only.py writes one file (no external data)
MAX_FLOAT_SHARE = 0.5  # never keep more of the weights float than this: the result would hardly gain


@dataclass
class Unit:
    label: str
    members: list[str]
    share: float  # the fraction of the candidates' weight bytes its members hold
    gain: float = 0.0

    @property
    def score(self) -> float:
        return self.gain / (self.share + FREE_SHARE)


def input_producers(model_path: Path, op_types: set[str] | None):
    """For QDQ: a node kept in float still reads its inputs through the Q/DQ pair its producer's
    quantized output got (e.g. a Softmax after an Add of a -1e4 attention mask: the error is in
    that edge). So keeping a node in float also keeps the quantizable producers of its inputs."""
    graph = load_graph(model_path).graph
    producer = {o: n for n in graph.node for o in n.output if o}
    by_name = {n.name: n for n in graph.node}

    def expand(group: list[str]) -> list[str]:
        found = []
        for name in group:
            node = by_name.get(name)
            for inp in node.input if node is not None else ():
                p = producer.get(inp)
                if p is not None and p.name and (op_types is None or p.op_type in op_types):
                    found.append(p.name)
        return [n for n in dict.fromkeys(found) if n not in group]

    return expand


def _weight_bytes(model: onnx.ModelProto) -> dict[str, int]:
    """node name -> bytes of the weights (initializers, Constant outputs) it reads, main graph."""
    graph = model.graph
    sizes = {t.name: int(np.prod(t.dims, dtype=np.int64)) * 4 for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    sizes[n.output[0]] = int(np.prod(a.t.dims, dtype=np.int64)) * 4
    return {n.name: sum(sizes.get(i, 0) for i in n.input) for n in graph.node if n.name}


def share_of(nodes: list[str], weights: dict[str, int], total: int) -> float:
    return sum(weights.get(n, 0) for n in nodes) / total


def static_units(model: onnx.ModelProto, candidates: list[str], expand=None) -> list[Unit]:
    """The units the search measures (see the module docstring), in the float model's order."""
    weights = _weight_bytes(model)
    total = max(sum(weights.get(c, 0) for c in candidates), 1)
    op_type = {n.name: n.op_type for n in model.graph.node if n.name}
    units: list[Unit] = []
    seen: set[frozenset] = set()

    def add(label: str, members: list[str]) -> None:
        if expand is not None:
            members = members + [m for m in expand(members) if m not in members]
        key = frozenset(members)
        if members and key not in seen:
            seen.add(key)
            units.append(Unit(label, members, sum(weights.get(m, 0) for m in members) / total))

    heavy = [i for i, c in enumerate(candidates) if weights.get(c, 0) > 0]
    count = min(SEGMENTS, len(heavy))
    if count >= 2:
        starts = [0] + [heavy[len(heavy) * k // count] for k in range(1, count)] + [len(candidates)]
        for k in range(count):
            part = candidates[starts[k]:starts[k + 1]]
            add(f"segment {k + 1}/{count} ({part[0]} .. {part[-1]})", part)
        for k in range(2, count):  # the first stages together: their errors compound downstream
            part = candidates[:starts[k]]
            if sum(weights.get(c, 0) for c in part) / total <= MAX_FLOAT_SHARE:
                add(f"segments 1-{k}/{count} ({part[0]} .. {part[-1]})", part)
    by_type: dict[str, list[str]] = {}
    for c in candidates:
        by_type.setdefault(op_type.get(c, "?"), []).append(c)
    for kind, members in by_type.items():
        if 2 <= len(members) < len(candidates):
            add(f"every {kind}", members)
    named = sorted(blocks_of(candidates).items(), key=lambda b: -len(b[1]))
    for label, members in named[:MAX_NAMED_BLOCKS]:
        add(label, members)
    if len(candidates) <= SINGLE_NODES_UP_TO:
        for c in candidates:
            add(c, [c])
    return units


def static_loop(attempt: Attempt, stage: Staging, name: str, prepared: Path, feeds: FeedSource,
                excluded: list[str], thresholds: Thresholds, op_types: set[str], report: Reporter,
                expand=None) -> LoopResult:
    """See the module docstring."""
    attempts: list[dict] = []
    checker = AttemptChecker(prepared, feeds, thresholds, stage.dir)  # the float model runs once
    dst = attempt_file(attempt, stage, name, 0, excluded, check=False)  # the checker loads it next
    if checker(dst, [], attempts):
        return LoopResult(dst, [], attempts, True)
    report.check()
    report(0.1, "measuring what keeping each stage, op type and block in float gains")
    search = _Search(dst, prepared, feeds, excluded, thresholds, op_types, report.sub(0.1, 0.8), stage, expand,
                     checker.reference(SEARCH_BATCHES), base=checker.last[:SEARCH_BATCHES])
    order, kept, info = search.choose()
    rest = [u for u in order if not set(u.members) <= set(kept)]
    bar = min(1.0, thresholds.min_cosine + SEARCH_MARGIN * (1.0 - thresholds.min_cosine))
    fallback: tuple[Path, list[str]] | None = None  # the last attempt that met the target, not the margin
    for round_ in range(1, MAX_ROUNDS + 1):
        if not kept:
            break
        report.check()
        report(0.8 + 0.2 * round_ / (MAX_ROUNDS + 1), f"quantizing with {len(kept)} node(s) kept in float")
        previous = dst
        dst = attempt_file(attempt, stage, name, round_, excluded + kept, check=False)
        if fallback is None or previous != fallback[0]:
            shutil.rmtree(previous.parent, ignore_errors=True)
        passed = checker(dst, kept, attempts)
        if passed and attempts[-1]["min_cosine"] >= bar:
            light = _with_int8_weights(dst, kept, stage, checker, attempts, info, thresholds)
            return LoopResult(light, kept, attempts, True, info)
        if passed:  # met where the ranges came from, without the room pages they never saw need
            if fallback is not None:
                shutil.rmtree(fallback[0].parent, ignore_errors=True)
            fallback = (dst, kept)
        if info.get("alone"):  # the unit that met the target alone did not, for real: the units holding it
            refused = {frozenset(kept)}
            search.report = report.sub(0.8 + 0.2 * round_ / (MAX_ROUNDS + 1), 0.8 + 0.2 * (round_ + 0.5) / (MAX_ROUNDS + 1))
            order, more_kept, info = search.choose(refused)
            rest = [u for u in order if not set(u.members) <= set(more_kept)]
            if frozenset(more_kept) in refused or not more_kept:
                break
            kept = more_kept
            continue
        more, rest = rest[: 2 ** (round_ - 1)], rest[2 ** (round_ - 1):]
        if not more:
            break
        kept = list(dict.fromkeys(kept + [m for u in more for m in u.members]))
    if fallback is not None:  # the held-out verdict decides
        if dst != fallback[0]:
            shutil.rmtree(dst.parent, ignore_errors=True)
        info["margin_missed"] = True
        return LoopResult(fallback[0], fallback[1], attempts, True, info)
    return LoopResult(dst, kept, attempts, False, info)


def _with_int8_weights(dst: Path, kept: list[str], stage: Staging, checker: AttemptChecker, attempts: list[dict],
                       info: dict, thresholds: Thresholds) -> Path:
    """`dst` with int8 weights for the weights of the nodes kept in float (weight_only.py) when that
    meets the target plus the search's margin on the search inputs (room for held-out ones: the
    detector's 0.9905 there was 0.9898 on other pages), else `dst`; `info["int8_weights"]`: how many."""
    if model_size(dst) > BIG_MODEL_BYTES:
        return dst
    light = stage.path("int8_weights")
    light.mkdir(exist_ok=True)
    light = light / dst.name
    model = load_full(dst)
    count = len(int8_weights(model, kept, WEIGHT_ONLY_MIN_VALUES).names(REWRITTEN))
    if not count:
        return dst
    onnx.save_model(model, str(light))
    margin = SEARCH_MARGIN * (1.0 - thresholds.min_cosine)
    if checker(light, kept, attempts) and attempts[-1]["min_cosine"] >= min(1.0, thresholds.min_cosine + margin):
        info["int8_weights"] = count
        return light
    attempts.pop()  # not taken: the record of the file written stays the last
    return dst


class _Search:
    """The switched model of the first attempt, its units, and every verdict so far (a set of float
    nodes runs once, across `choose` calls)."""

    def __init__(self, quantized: Path, prepared: Path, feeds: FeedSource, excluded: list[str],
                 thresholds: Thresholds, op_types: set[str], report: Reporter, stage: Staging, expand,
                 reference=None, base: list | None = None) -> None:
        """`base`: the quantized model's outputs on the search batches, already run (the first check)."""
        self.runner, self.candidates, self.judge = search_bench(quantized, prepared, feeds, excluded, thresholds,
                                                                op_types, stage, qdq=True, reference=reference)
        float_model = load_full(prepared)
        self.units = static_units(float_model, self.candidates, expand)[: MAX_EVALUATIONS // 2]
        self.units.sort(key=lambda u: u.share)  # the cheapest first: the first that meets the target alone ends it
        self.weights = _weight_bytes(float_model)
        del float_model
        self.total = max(sum(self.weights.get(c, 0) for c in self.candidates), 1)
        self.report, self.capped, self.reused = report, False, 0
        self.known: dict[frozenset, Verdict] = {}
        if base and reference is not None and len(base) == len(reference[0]):
            self.known[frozenset()] = self.judge(base)  # nothing float: the real model's own outputs

    def measure(self, keep: list[str], what: str) -> Verdict | None:
        key = frozenset(keep)
        if key in self.known:
            self.reused += 1
            return self.known[key]
        if self.runner.runs >= MAX_EVALUATIONS:
            self.capped = True
            return None
        self.report.check()
        self.report(min(self.runner.runs / MAX_EVALUATIONS, 0.99), what)
        self.known[key] = self.judge(self.runner.run(keep))
        return self.known[key]

    def choose(self, refused: set[frozenset] = frozenset()) -> tuple[list[Unit], list[str], dict]:
        """(the units by score, the nodes that meet the criteria (else every unit that helped), what was
        measured). `refused`: float sets that met the target in the switched runs but not for real:
        never taken alone again, and the units holding one are measured first."""
        base = self.measure([], "measuring the quantized model")
        assert base is not None
        units = self.units
        if refused:
            holding = [u for u in units if any(r < frozenset(u.members) for r in refused)]
            units = holding + [u for u in units if u not in holding]
        alone: Unit | None = None
        for unit in units:
            if frozenset(unit.members) in refused:
                continue
            verdict = self.measure(unit.members, f"measuring {unit.label} in float")
            unit.gain = base.loss - verdict.loss if verdict is not None else 0.0
            if verdict is not None and verdict.passed and unit.share <= MAX_FLOAT_SHARE:
                alone = unit  # the cheapest unit that meets it: nothing measured after it could be cheaper alone
                break
        measured = [u for u in self.units if frozenset(u.members) in self.known]
        order = sorted((u for u in measured if u.gain > 0), key=lambda u: -u.score)
        if alone is not None:
            order = [alone] + [u for u in order if u is not alone]
        chosen, kept, met = self._greedy(order)
        info = {"candidates": len(self.candidates), "blocks": len(self.units), "base_min_cosine": round(base.min_cosine, 6),
                "ranking": [{"unit": u.label, "gain": round(u.gain, 6), "weights": round(u.share, 4)}
                            for u in order[:10]],
                "kept_units": [u.label for u in chosen], "evaluations": self.runner.runs, "reused": self.reused,
                "met_in_search": met, "capped": self.capped, "alone": alone is not None and chosen == [alone]}
        return order, kept, info

    def _greedy(self, order: list[Unit]) -> tuple[list[Unit], list[str], bool]:
        """Units added by score until the target plus margin is met, then those the others make unnecessary dropped."""
        chosen: list[Unit] = []
        kept: list[str] = []
        met = False
        for unit in order:
            trial = list(dict.fromkeys(kept + unit.members))
            if len(trial) == len(kept) or share_of(trial, self.weights, self.total) > MAX_FLOAT_SHARE:
                continue
            verdict = self.measure(trial, f"keeping {len(trial)} node(s) in float")
            if verdict is None:
                break
            chosen, kept = chosen + [unit], trial
            if verdict.passed:
                met = True
                break
        if met:
            for unit in sorted(chosen[:-1], key=lambda u: u.score):  # drop what the others make unnecessary
                others = [u for u in chosen if u is not unit]
                trial = list(dict.fromkeys(m for u in others for m in u.members))
                verdict = self.measure(trial, f"trying without {unit.label}")
                if verdict is None:
                    break
                if verdict.passed:
                    chosen, kept = others, trial
        return chosen, kept, met


def search_notes(info: dict, mode: str) -> list[str]:
    """The report's lines about what an accuracy search measured (`info`: `LoopResult.search`)."""
    if not info:
        return []
    if "bits" in info:  # int4: the widths the search chose (int4_search.py)
        return describe_bits(info)
    if "screened" in info:  # dynamic: one sensitivity pass, then the top suspects measured (search.py)
        lines = [f"accuracy search: {info['candidates']} quantized node(s) ranked by added error in one pass, "
                 f"the top {info['screened']} measured in float, {info['evaluations']} runs"]
    else:
        what = "unit(s) (stages, op types, blocks)" if mode == "static" else "block(s)"
        lines = [f"accuracy search: {info['candidates']} quantized node(s) and {info['blocks']} {what} measured "
                 f"in float, {info['evaluations']} runs"]
    if info.get("held_out_decided"):
        lines.append("the held-out inputs missed the target where the searched ones met it: nodes were kept in float, "
                     "in the order the search measured, until the held-out inputs met it (their verdict chose how "
                     "many: give more validation inputs for a verdict on inputs nothing was chosen on)")
    if info.get("kept_units"):
        lines.append(f"kept in float by unit: {'; '.join(info['kept_units'])}")
    if info.get("int8_weights"):
        lines.append(f"int8 weights for {info['int8_weights']} of the nodes kept in float (they compute in float: "
                     "their activations are what int8 could not hold)")
    if info.get("capped"):
        lines.append(f"accuracy search stopped at its budget of {MAX_EVALUATIONS} runs: the nodes kept in float "
                     "may be more than needed")
    return lines
