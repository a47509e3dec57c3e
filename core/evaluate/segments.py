"""Run a model a piece at a time, so that no more than a piece's weights are held in memory.

Why: the held-out verdict of a quantized LLM runs its float reference (8 GB for 2e9 parameters),
which ONNX Runtime holds whole in memory (and packs a second copy of its MatMul weights). Cut along
the node list, each piece is a model of its own whose weights ORT reads from the source's external
data files; every batch goes through a piece before the next one loads.

Contract: `pieces(model, budget)` splits the main graph of `model` (loaded without its weights,
nodes in topological order) into runs of nodes whose initializers total at most `budget` bytes (a
node over it alone is a piece of its own). `run_in_pieces(model, folder, feeds, outputs, budget)`
returns, per feed, the arrays of `outputs`: the same values a session of the whole model gives.
Only one piece's session exists at a time; what crosses a cut (activations) is all that is kept.
`validate_in_pieces(model, reference, feeds, thresholds)`: `validate`'s comparison of the outputs,
both models run so.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from onnxport.core.evaluate.compare import VALUES, OutputStats, Thresholds, output_kinds
from onnxport.core.evaluate.runtime import precision_of, run, session
from onnxport.core.evaluate.validate import ValidationReport
from onnxport.core.graph.runnable import topological_sort
from onnxport.core.graph.uses import node_uses
from onnxport.core.io.model_io import copy_model, load_graph, tensor_nbytes
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import Reporter

PIECE_BYTES = 512 << 20


@dataclass
class Piece:
    nodes: list[onnx.NodeProto]
    takes: list[str]  # tensors it reads that are made before it (or graph inputs)
    hands_on: list[str]  # tensors it makes that later pieces or the caller read
    weight_bytes: int
    kept_after: set[str]  # tensors made so far that later pieces or the caller read


def pieces(model: onnx.ModelProto, budget: int, outputs: Iterable[str]) -> list[Piece]:
    """See the module docstring; `outputs`: the tensors the caller wants from the last piece."""
    graph = model.graph
    topological_sort(graph)  # in place; a cycle stays, and ORT names it
    sizes = {t.name: tensor_nbytes(t) for t in graph.initializer}
    groups: list[tuple[list[onnx.NodeProto], set[str], int]] = []
    nodes: list[onnx.NodeProto] = []
    held: set[str] = set()
    total = 0
    for node in graph.node:
        reads = {n for n in node_uses(node) if n in sizes and n not in held}
        extra = sum(sizes[n] for n in reads)
        if nodes and total + extra > budget:
            groups.append((nodes, held, total))
            nodes, held, total = [], set(), 0
            reads = {n for n in node_uses(node) if n in sizes}
            extra = sum(sizes[n] for n in reads)
        nodes.append(node)
        held |= reads
        total += extra
    if nodes or not groups:
        groups.append((nodes, held, total))
    return _with_ends(groups, set(sizes), list(outputs))


def _with_ends(groups, initializers: set[str], outputs: list[str]) -> list[Piece]:
    """Each group's inputs (made before it) and outputs (read after it, or wanted at the end)."""
    made_in: dict[str, int] = {}
    for i, (nodes, _, _) in enumerate(groups):
        for node in nodes:
            for out in node.output:
                if out:
                    made_in[out] = i
    wanted: list[set[str]] = [set() for _ in groups]
    takes: list[list[str]] = []
    for nodes, _, _ in groups:
        mine = {o for n in nodes for o in n.output}
        reads = dict.fromkeys(u for n in nodes for u in node_uses(n) if u not in mine and u not in initializers)
        takes.append(list(reads))
        for name in reads:
            if name in made_in:
                wanted[made_in[name]].add(name)
    for name in outputs:
        if name in made_in:
            wanted[made_in[name]].add(name)
    later = set(outputs)
    kept: list[set[str]] = []
    for i in reversed(range(len(groups))):
        kept.append(set(later))
        later |= set(takes[i])
    kept.reverse()
    return [Piece(nodes, takes[i], sorted(wanted[i]), size, kept[i]) for i, (nodes, _, size) in enumerate(groups)]


def _piece_model(model: onnx.ModelProto, piece: Piece, types: dict[str, int]) -> onnx.ModelProto:
    """A model of `piece`: its nodes, the initializers they read (external ones stay references)."""
    reads = {u for n in piece.nodes for u in node_uses(n)}
    part = copy_model(model, initializers=False, graph=False)
    graph = helper.make_graph(
        piece.nodes, f"{model.graph.name}_piece",
        [helper.make_tensor_value_info(n, types[n], None) for n in piece.takes if n in types],
        [onnx.ValueInfoProto(name=n) for n in piece.hands_on],
        [t for t in model.graph.initializer if t.name in reads])
    part.graph.CopyFrom(graph)
    return part


def run_in_pieces(model: onnx.ModelProto, folder: Path, feeds: list[dict[str, np.ndarray]], outputs: list[str],
                  budget: int = PIECE_BYTES, label: str = "model", hint: str | None = None) -> list[list[np.ndarray]]:
    """See the module docstring; `folder`: where the model's external data files are; `hint`: how
    to give other input sizes, for a run that fails on these."""
    values = [dict(feed) for feed in feeds]
    inputs = {i.name for i in model.graph.input}
    for number, piece in enumerate(pieces(model, budget, outputs)):
        if not piece.nodes:
            continue
        types = {n: onnx.helper.np_dtype_to_tensor_dtype(np.asarray(values[0][n]).dtype)
                 for n in piece.takes if n in values[0]}
        sess = session(_piece_model(model, piece, types), label=f"{label} (piece {number + 1})",
                       external_folder=folder)
        for held in values:
            feed = {n: held[n] for n in piece.takes if n in held}
            held.update(zip(piece.hands_on, run(sess, piece.hands_on, feed, label=label, hint=hint,
                                                 shown=[n for n in feed if n in inputs])))
        del sess
        for held in values:
            for name in [n for n in held if n not in piece.kept_after]:
                del held[name]
    missing = [n for n in outputs if n not in values[0]] if values else []
    if missing:
        raise OnnxportError(f"{label}: output(s) {', '.join(missing[:5])} are made by no node")
    return [[held[name] for name in outputs] for held in values]


def validate_in_pieces(model_path: Path, reference_path: Path, feeds, thresholds: Thresholds,
                       budget: int = PIECE_BYTES, report: Reporter | None = None) -> ValidationReport:
    """`validate`'s output comparison with both models run in pieces (no per-node ranking: that
    holds every intermediate tensor of both models in memory)."""
    started = time.perf_counter()
    report = report or Reporter()
    model, reference = load_graph(model_path), load_graph(reference_path)
    names = [o.name for o in model.graph.output]
    batches = list(feeds)
    if not batches:
        raise OnnxportError(f"{feeds.description}: no inputs to validate with")
    report.check()
    report(0.1, f"running {reference_path.name} a piece at a time")
    want = run_in_pieces(reference, reference_path.parent, batches, names, budget, f"reference {reference_path.name}",
                         feeds.hint)
    report.check()
    report(0.6, f"running {model_path.name} a piece at a time")
    got = run_in_pieces(model, model_path.parent, batches, names, budget, model_path.name, feeds.hint)
    kinds = output_kinds(model)
    stats = {name: OutputStats(name, kinds.get(name, VALUES)) for name in names}
    for g_batch, w_batch in zip(got, want):
        for name, g, w in zip(names, g_batch, w_batch):
            stats[name].update(g, w)
    return ValidationReport(
        model=str(model_path), reference=str(reference_path), reference_kind="model",
        precision=precision_of(model), inputs=feeds.description, batches=len(batches), thresholds=thresholds,
        outputs=[stats[n].result(thresholds) for n in names], seconds=time.perf_counter() - started)
