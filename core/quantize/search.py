"""Which nodes to keep in float so a quantized model meets its accuracy target: the searches.

Why: a transformer quantized whole misses the target because of one or two layers; the error each
node adds (sensitivity.py, one pass) ranks suspects loosely, so their impact is *measured* on the
outputs, each back in float, on one switched model (float_switch.py): no re-quantizing.

Contract:
- `dynamic_loop(...)` (dynamic int8): quantize everything; with `verdict` (held-out) that attempt,
  tuned on nothing, is judged by it at once (`LoopResult.final`; missed there but met on the search
  part: `held_out_loop`, the held-out part decides how many nodes stay float). Else rank nodes by added error (one pass), measure each role block,
  then the top `SCREENED` nodes and those of the best blocks one by one; keep nodes by gain per
  weight byte until met with a margin, drop the unneeded (biggest first), quantize and check.
- `layer_error_loop(...)` (static QDQ, float16): keep the worst 1, 2, 4... nodes by added error.
Both return `LoopResult`: the file, the nodes kept, the real attempts (each validated), whether
the target was met, and what the search measured. Never prints non-finite numbers."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from onnxport.core.evaluate.compare import CLASSES, VALUES, OutputStats, Thresholds, output_kinds
from onnxport.core.evaluate.feeds import FeedSource
from onnxport.core.evaluate.runtime import adapt_feed, load_full, session
from onnxport.core.evaluate.sensitivity import layer_errors
from onnxport.core.evaluate.validate import ValidationReport, validate
from onnxport.core.export.staging import Staging
from onnxport.core.io.model_io import load_graph
from onnxport.core.quantize.attempt_check import AttemptChecker, attempt_record
from onnxport.core.quantize.float_switch import SwitchedRunner, switched
from onnxport.core.quantize.gain import all_graphs
from onnxport.core.quantize.qdq_switch import QdqRunner, qdq_switched
from onnxport.core.util.progress import Reporter

MAX_ROUNDS = 8
SCREENED = 8  # nodes adding the most error (one pass) whose gain in float is then measured one by one
TOP_ROLES = 2  # and the nodes of the roles (one role in every layer) whose float gains most
SEARCH_BATCHES = 4  # batches of the validation inputs the search measures on (the final check uses all)
# The search aims at cosine >= target + margin x (1 - target): room for inputs it did not see, and for
# batches made up otherwise (a dynamic activation scale spans its whole batch). Measured on
# all-MiniLM-L6-v2: held-out sentences score 0.001-0.003 below the sentences searched on.
SEARCH_MARGIN = 0.3
Attempt = Callable[[list[str], Path], None]
HeldOutVerdict = Callable[[Path], ValidationReport]


@dataclass
class LoopResult:
    path: Path
    kept: list[str]
    attempts: list[dict]
    met: bool
    search: dict = field(default_factory=dict)
    final: ValidationReport | None = None  # the held-out verdict of `path`, when the loop measured it


@dataclass
class Verdict:
    passed: bool
    loss: float  # sum over outputs of (1 - cosine), plus (1 - argmax agreement) for classifiers
    min_cosine: float
    worst: str


class Judge:
    """Outputs of one run -> `Verdict` against the float model's outputs on the same feeds."""

    def __init__(self, reference: list[list[np.ndarray]], names: list[str], kinds: dict[str, str],
                 thresholds: Thresholds) -> None:
        self.reference, self.names, self.kinds, self.thresholds = reference, names, kinds, thresholds

    def __call__(self, outputs: list[list[np.ndarray]]) -> Verdict:
        stats = [OutputStats(n, self.kinds.get(n, VALUES)) for n in self.names]
        for got, want in zip(outputs, self.reference):
            for s, g, w in zip(stats, got, want):
                s.update(g, w)
        results = [s.result(self.thresholds) for s in stats]
        loss = 0.0
        for r in results:
            loss += 1.0 - r.cosine if np.isfinite(r.cosine) else 2.0
            loss += 1.0 if r.nan_mismatches else 0.0
            if r.kind == CLASSES and r.argmax_agreement is not None:
                loss += 1.0 - r.argmax_agreement
        worst = min(results, key=lambda r: r.cosine)
        return Verdict(all(r.passed for r in results), loss, worst.cosine, worst.name)


def blocks_of(names: list[str]) -> dict[str, list[str]]:
    """Groups of 2+ nodes: the same role in every numbered layer ('/encoder/layer.*/output/dense/MatMul')
    and all nodes of one layer ('/encoder/layer.3/*')."""
    number = re.compile(r"(?<=[./_])\d+(?=[./_]|$)")
    groups: dict[str, list[str]] = {}
    for name in names:
        if number.search(name):
            groups.setdefault(number.sub("*", name), []).append(name)
            for m in number.finditer(name):
                groups.setdefault(name[: m.end()] + "/*", []).append(name)
    return {k: v for k, v in groups.items() if 2 <= len(v) < len(names)}


def dynamic_loop(attempt: Attempt, stage: Staging, name: str, prepared: Path, feeds: FeedSource,
                 excluded: list[str], thresholds: Thresholds, op_types: set[str], report: Reporter,
                 verdict: HeldOutVerdict | None = None) -> LoopResult:
    """See the module docstring."""
    attempts: list[dict] = []
    checker = AttemptChecker(prepared, feeds, thresholds, stage.dir)  # the float model runs once
    dst = attempt_file(attempt, stage, name, 0, excluded, check=verdict is None)  # the verdict loads it
    if verdict is not None:
        final = verdict(dst)
        attempts.append(attempt_record(dst, [], final.outputs, final.passed, final.failures(), inputs="held out"))
        if final.passed:
            return LoopResult(dst, [], attempts, True, final=final)
        if checker(dst, [], []):  # met where the search tunes, missed on the held-out part
            return held_out_loop(attempt, stage, name, dst, prepared, feeds, excluded, thresholds, op_types, report,
                                 verdict, attempts, checker.reference(SEARCH_BATCHES))
    elif checker(dst, [], attempts):
        return LoopResult(dst, [], attempts, True)
    report.check()
    report(0.1, "measuring what keeping each quantized node in float gains")
    order, kept, info = _search(dst, prepared, feeds, excluded, thresholds, op_types, report.sub(0.1, 0.8), stage,
                                checker.reference(SEARCH_BATCHES))
    if not kept:
        return LoopResult(dst, [], attempts, False, info)
    rest = [n for n in order if n not in kept]
    for round_ in range(1, MAX_ROUNDS + 1):
        report.check()
        report(0.8 + 0.2 * round_ / (MAX_ROUNDS + 1), f"quantizing with {len(kept)} node(s) kept in float")
        previous = dst
        dst = attempt_file(attempt, stage, name, round_, excluded + kept)
        shutil.rmtree(previous.parent, ignore_errors=True)
        if checker(dst, kept, attempts):
            return LoopResult(dst, kept, attempts, True, info)
        if not rest:
            break
        more, rest = rest[: 2 ** (round_ - 1)], rest[2 ** (round_ - 1):]
        kept = kept + more
    return LoopResult(dst, kept, attempts, False, info)


def held_out_loop(attempt: Attempt, stage: Staging, name: str, dst: Path, prepared: Path, feeds: FeedSource,
                  excluded: list[str], thresholds: Thresholds, op_types: set[str], report: Reporter,
                  verdict: HeldOutVerdict, attempts: list[dict], reference) -> LoopResult:
    """`dst`, quantized whole, meets the target on the search part but misses it on the held-out part
    (a classifier's near-tie there that the search part lacks; 7-bit weights, exact on AVX2 without
    VNNI, add twice the rounding error of 8-bit ones). The search part still ranks the nodes (the
    error each removes from it, though it meets the target); nodes are kept in float in that order
    (`held_out_trials`) until the held-out part meets the target: the held-out part decides how many, and
    `info["held_out_decided"]` says so in the report."""
    report.check()
    report(0.1, "measuring what keeping each quantized node in float gains")
    order, _, info = _search(dst, prepared, feeds, excluded, thresholds, op_types, report.sub(0.1, 0.8), stage,
                             reference, rank_only=True)
    info["held_out_decided"] = True
    kept: list[str] = []
    for round_, kept in enumerate(held_out_trials(order), start=1):
        report.check()
        report(0.8 + 0.2 * round_ / (MAX_ROUNDS + 1), f"quantizing with {len(kept)} node(s) kept in float")
        previous = dst
        dst = attempt_file(attempt, stage, name, round_, excluded + kept, check=False)  # the verdict loads it
        shutil.rmtree(previous.parent, ignore_errors=True)
        final = verdict(dst)
        attempts.append(attempt_record(dst, kept, final.outputs, final.passed, final.failures(), inputs="held out"))
        if final.passed:
            return LoopResult(dst, kept, attempts, True, info, final=final)
    return LoopResult(dst, kept, attempts, False, info)


def held_out_trials(order: list[str]) -> list[list[str]]:
    """The float sets `held_out_loop` tries, at most `MAX_ROUNDS`: the first node, the second alone
    (the search part ranks them on inputs that lack the held-out part's trouble), then the first
    2, 4, 8... nodes."""
    trials = [order[:1], order[1:2]] + [order[:2 ** k] for k in range(1, MAX_ROUNDS)]
    unique = list(dict.fromkeys(tuple(t) for t in trials if t))
    return [list(t) for t in unique][:MAX_ROUNDS]


def _search(quantized: Path, prepared: Path, feeds: FeedSource, excluded: list[str], thresholds: Thresholds,
            op_types: set[str], report: Reporter, stage: Staging, reference=None,
            rank_only: bool = False) -> tuple[list[str], list[str], dict]:
    """(the order to keep nodes in float, the nodes that meet the criteria or [] if none do, what was measured).
    Sensitivity is measured once (every tensor of the quantized model against the float one, one
    run each) and per role block; only the `SCREENED` nodes adding the most error and the nodes of
    the `TOP_ROLES` best blocks are then measured one by one. `rank_only`: every one of those is
    measured (none ends the search by meeting the target alone), ordered by gain alone (not per
    weight byte: the most error removed first), and no set is chosen."""
    runner, candidates, judge = search_bench(quantized, prepared, feeds, excluded, thresholds, op_types, stage,
                                             reference=reference)
    total = max(SCREENED + len(candidates) // 4, 1)

    def measure(keep: list[str], what: str) -> Verdict:
        report.check()
        report(min(runner.runs / total, 0.99), what)
        return judge(runner.run(keep))

    base = measure([], "measuring the quantized model")
    report(0.02, "comparing every tensor with the float model's (one pass)")
    errors = layer_errors(quantized, prepared, runner.feeds[0], workdir=stage.dir, op_types=op_types)
    wanted = set(candidates)
    by_error = list(dict.fromkeys([n for e in errors for n in e.group if n in wanted] + candidates))
    roles = {b: m for b, m in blocks_of(candidates).items() if not b.endswith("/*")}  # one role, every layer
    role_gain = {b: base.loss - measure(m, f"measuring block {b} in float").loss for b, m in roles.items()}
    top_roles = sorted(role_gain, key=lambda b: -role_gain[b])[:TOP_ROLES]
    screened = list(dict.fromkeys([c for b in top_roles if role_gain[b] > 0 for c in roles[b]] + by_error[:SCREENED]))
    gain: dict[str, float] = {}
    alone = None  # a node that meets the target on its own: the search stops there
    for c in screened:
        verdict = measure([c], f"measuring {c} in float")
        gain[c] = base.loss - verdict.loss
        if verdict.passed and not rank_only:
            alone = c
            break
    cost = weight_bytes(prepared, candidates)
    order = keep_order(gain, {} if rank_only else cost) + [c for c in by_error if c not in gain]
    info = {"candidates": len(candidates), "screened": len(gain), "blocks": len(roles),
            "base_min_cosine": round(base.min_cosine, 6),
            "ranking": sorted([{"unit": c, "gain": round(g, 6)} for c, g in gain.items() if g > 0]
                              + [{"unit": b, "gain": round(g, 6)} for b, g in role_gain.items() if g > 0],
                              key=lambda u: -u["gain"])[:10]}
    kept: list[str] = [alone] if alone else []
    met = alone is not None
    for node in order if not met and not rank_only else []:  # stop at the first set that meets the target
        kept.append(node)
        if measure(kept, f"keeping {len(kept)} node(s) in float").passed:
            met = True
            break
    if met:
        for node in drop_order(kept[:-1], cost):  # drop what the others make unnecessary, the biggest first
            trial = [k for k in kept if k != node]
            if measure(trial, f"trying without {node}").passed:
                kept = trial
    info["evaluations"] = runner.runs
    info["met_in_search"] = met
    return order, kept if met else [], info


def weight_bytes(prepared: Path, names: list[str]) -> dict[str, int]:
    """The float weight bytes each named node reads (its initializer inputs): what keeping it costs."""
    model = load_graph(prepared)
    sizes = {t.name: 4 * int(np.prod(t.dims, dtype=np.int64)) for g in all_graphs(model) for t in g.initializer}
    wanted = set(names)
    return {n.name: sum(sizes.get(i, 0) for i in n.input) for g in all_graphs(model) for n in g.node
            if n.name in wanted}


def keep_order(gain: dict[str, float], cost: dict[str, int]) -> list[str]:
    """Nodes in the order to keep them in float: most gain per weight byte first (MiniLM's word
    embeddings, 47 MB, gained about what a 0.6 MB MatMul did), then those that gained nothing."""
    useful = sorted((c for c in gain if gain[c] > 0), key=lambda c: -gain[c] / max(cost.get(c, 0), 1024))
    return useful + sorted((c for c in gain if gain[c] <= 0), key=lambda c: -gain[c])


def drop_order(kept: list[str], cost: dict[str, int]) -> list[str]:
    """The order to try leaving kept nodes out again: the biggest first."""
    return sorted(kept, key=lambda c: -cost.get(c, 0))


def search_bench(quantized: Path, prepared: Path, feeds: FeedSource, excluded: list[str], thresholds: Thresholds,
                 op_types: set[str], stage: Staging, qdq: bool = False,
                 reference=None) -> tuple[SwitchedRunner, list[str], Judge]:
    """The switched model of `quantized` (every quantized node of `op_types` not in `excluded` can go
    back to float), its candidates in the float model's order, and the judge (the target plus the
    search margin) against the float model's outputs on the first `SEARCH_BATCHES` batches
    (`reference`: those already computed, as (batches, outputs, output names)). `qdq`: a static
    QDQ model, switched on its Q/DQ pairs (qdq_switch.py)."""
    float_model = load_full(prepared)
    candidates = list(dict.fromkeys(n.name for g in all_graphs(float_model) for n in g.node  # bodies too
                                    if n.op_type in op_types and n.name and n.name not in excluded))
    if qdq:
        model, touching = qdq_switched(load_full(quantized), float_model, candidates)
        reached = {n for nodes in touching.values() for n in nodes}
        candidates = [c for c in candidates if c in reached]
    else:
        model, switches = switched(load_full(quantized), float_model, candidates, in_place=True)
        candidates = [c for c in candidates if c in switches]
    if reference is None:
        names = [o.name for o in float_model.graph.output]
        ref_sess = session(float_model, label="float model", workdir=stage.dir)
        batches = [adapt_feed(feed, ref_sess) for _, feed in zip(range(SEARCH_BATCHES), feeds)]
        reference = [ref_sess.run(names, feed) for feed in batches]
        del ref_sess
    else:  # the float model's outputs, computed once (attempt_check.AttemptChecker.reference)
        batches, reference, names = reference
    del float_model
    sess = session(model, label="search model", workdir=stage.dir)
    runner = QdqRunner(sess, touching, batches, names) if qdq else SwitchedRunner(sess, switches, batches, names)
    del model
    margin = SEARCH_MARGIN * (1.0 - thresholds.min_cosine)
    judge = Judge(reference, names, output_kinds(load_graph(prepared)),
                  Thresholds(**{**thresholds.__dict__, "min_cosine": min(1.0, thresholds.min_cosine + margin)}))
    return runner, candidates, judge


def attempt_file(attempt: Attempt, stage: Staging, name: str, round_: int, exclude: list[str],
                 check: bool = True) -> Path:
    """Write one attempt; `check`: load it in ORT (False when the caller's next step loads it anyway)."""
    folder = stage.path(f"attempt{round_}")
    folder.mkdir()
    dst = folder / name
    attempt(exclude, dst)
    if check:
        session(dst, label=f"quantized {name}")  # ORT must run what we write
    return dst


def check_file(dst: Path, prepared: Path, feeds: FeedSource, thresholds: Thresholds, kept: list[str],
           attempts: list[dict]):
    check = validate(dst, prepared, inputs=feeds, thresholds=thresholds, layers=False)
    attempts.append(attempt_record(dst, kept, check.outputs, check.passed, check.failures()))
    return check


def layer_error_loop(attempt: Attempt, stage: Staging, name: str, prepared: Path, feeds: FeedSource,
                     excluded: list[str], thresholds: Thresholds | None, op_types: set[str] | None,
                     report: Reporter, expand=None) -> LoopResult:
    """See the module docstring (`thresholds` None: one attempt, no validation)."""
    kept: list[str] = []
    attempts: list[dict] = []
    previous: Path | None = None
    for round_ in range(MAX_ROUNDS + 1):
        report.check()
        report(round_ / (MAX_ROUNDS + 1), "quantizing" if round_ == 0 else
               f"quantizing again with {len(kept)} node(s) kept in float")
        dst = attempt_file(attempt, stage, name, round_, excluded + kept)
        if previous is not None:
            shutil.rmtree(previous.parent, ignore_errors=True)
        previous = dst
        if thresholds is None:
            return LoopResult(dst, kept, attempts, True)
        if check_file(dst, prepared, feeds, thresholds, kept, attempts).passed:
            return LoopResult(dst, kept, attempts, True)
        if round_ == MAX_ROUNDS:
            break
        report.check()
        errors = layer_errors(dst, prepared, feeds.first(), workdir=stage.dir, op_types=op_types)
        groups = [[n for n in e.group if n not in excluded and n not in kept] for e in errors if e.added > 0]
        groups = [g for g in groups if g]
        if not groups:
            break
        for group in groups[: 2**round_]:
            if expand is not None:
                group = group + expand(group)
            kept += [n for n in group if n not in kept and n not in excluded]
    assert previous is not None
    return LoopResult(previous, kept, attempts, False)
