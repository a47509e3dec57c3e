"""Repeated blocks (transformer layers, attention heads) found by their scopes, for the focused
preview (`focus`) to collapse.

Why: an LLM graph is the same layer N times, often with the same head many times inside each;
drawing the first and the last of a run says as much as drawing all of them.
Terms: a *block* is the nodes whose names share a numbered scope segment (`/model/layers.7/...` is
block 7 of the *family* `/model/layers`); its *signature* is its op types in graph order; a *run*
is consecutive blocks of one family with the same signature and no `protected` (selected) node. A
run of at least `MIN_RUN` blocks of `MIN_BLOCK_NODES` nodes is collapsible: all but its first and
last blocks.
`scope_table(names)` parses every node name once; `find_runs(...)` gives the collapsible runs,
outermost families first, so `[r for r in runs if r.depth <= d]` is a consistent collapse at any
depth `d`; `placeholder_node(run, ...)` is the node drawn in a run's place. Pure list/dict work.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import onnx

SCOPE_INDEX = re.compile(r"^(.*?[A-Za-z])[._](\d+)$")
MIN_RUN = 3
MIN_BLOCK_NODES = 2
MAX_DEPTH = 3
COLLAPSED_WORD = "collapsed"  # ends the placeholder's op type ('layers 1-19 collapsed'; Netron draws it)


@dataclass(frozen=True)
class CollapsedRun:
    """The middle of a run of identical blocks: indices `first`..`last` of `family`, `nodes`
    (graph positions, in graph order) drawn as one placeholder."""

    family: str
    first: int
    last: int
    depth: int
    nodes: tuple[int, ...]
    block_nodes: tuple[tuple[int, ...], ...] = ()  # the nodes of each collapsed block, first to last

    @property
    def blocks(self) -> int:
        return self.last - self.first + 1

    @property
    def short(self) -> str:
        """The family's own segment: 'layers' for '/model/layers'."""
        return self.family.rstrip("/").rpartition("/")[2] or self.family

    @property
    def label(self) -> str:
        """'layers.1 … layers.19': what the user reads on the placeholder."""
        return f"{self.short}.{self.first} … {self.short}.{self.last}"

    @property
    def name(self) -> str:
        """The placeholder node's name: the full scope of the first and the last collapsed block."""
        return f"{self.family}.{self.first}…{self.last}"

    def first_blocks(self, count: int) -> CollapsedRun:
        """This run with only its first `count` blocks collapsed (the later ones are drawn)."""
        kept = self.block_nodes[:count]
        return CollapsedRun(self.family, self.first, self.first + count - 1, self.depth,
                            tuple(sorted(i for block in kept for i in block)), kept)

    @property
    def description(self) -> str:
        return f"{self.label}: {self.blocks} identical blocks, {len(self.nodes):,} nodes"


def scope_indices(name: str) -> list[tuple[str, int]]:
    """(family, index) of each numbered scope segment of a node name, outermost first
    ('/model/layers.3/self_attn/head.5/Slice_2' -> [('/model/layers', 3), ('/model/layers.3/self_attn/head', 5)]).
    The last segment is the node's own name, not a scope."""
    if "/" not in name:
        return []
    parts = name.split("/")[:-1]
    found = []
    for k, part in enumerate(parts):
        if part and part[-1].isdigit():
            match = SCOPE_INDEX.match(part)
            if match:
                found.append(("/".join(parts[:k] + [match.group(1)]), int(match.group(2))))
    return found


def scope_table(names: Iterable[str]) -> list[list[tuple[str, int]]]:
    """`scope_indices` of each name, in order (names of one scope share one parsed list)."""
    cache: dict[str, list[tuple[str, int]]] = {}
    table = []
    for name in names:
        scope = name.rpartition("/")[0]
        found = cache.get(scope)
        if found is None:
            found = cache[scope] = scope_indices(name)
        table.append(found)
    return table


def find_runs(scopes: Sequence[list[tuple[str, int]]], ops: Sequence[str], nodes: Iterable[int],
              protected: Iterable[int] = ()) -> list[CollapsedRun]:
    """The collapsible runs among `nodes` (see the module docstring); `scopes`: `scope_table` of
    the graph's node names."""
    remaining = sorted(nodes)
    parsed = scopes
    protected = set(protected)
    runs: list[CollapsedRun] = []
    for depth in range(MAX_DEPTH):
        families: dict[str, dict[int, list[int]]] = {}
        for i in remaining:
            segments = parsed[i]
            if len(segments) > depth:
                family, index = segments[depth]
                families.setdefault(family, {}).setdefault(index, []).append(i)
        if not families:
            break
        found = [run for family, blocks in families.items() for run in _family_runs(family, blocks, ops, protected, depth)]
        if found:
            collapsed = {i for run in found for i in run.nodes}
            remaining = [i for i in remaining if i not in collapsed]
            runs += found
    return runs


def _family_runs(family: str, blocks: dict[int, list[int]], ops: Sequence[str], protected: set[int],
                 depth: int) -> list[CollapsedRun]:
    runs: list[CollapsedRun] = []
    current: list[int] = []  # indices of the run being followed
    signature: tuple | None = None
    for index in sorted(blocks) + [None]:
        block = blocks.get(index, []) if index is not None else []
        sig = tuple(ops[i] for i in block) if index is not None else None
        usable = index is not None and len(block) >= MIN_BLOCK_NODES and not any(i in protected for i in block)
        if usable and current and index == current[-1] + 1 and sig == signature:
            current.append(index)
            continue
        if len(current) >= MIN_RUN:
            middle = current[1:-1]
            nodes = tuple(sorted(i for k in middle for i in blocks[k]))
            runs.append(CollapsedRun(family, middle[0], middle[-1], depth, nodes, tuple(tuple(blocks[k]) for k in middle)))
        current, signature = ([index], sig) if usable else ([], None)
    return runs


def placeholder_node(run: CollapsedRun, inputs: list[str], outputs: list[str], domain: str) -> onnx.NodeProto:
    """The node drawn in place of `run`: named by its scopes, its op type and doc string saying what it stands for."""
    node = onnx.NodeProto(op_type=collapsed_op_type(run), domain=domain,
                          name=run.name,
                          doc_string=f"{run.description} (collapsed by the preview: Show more, or select a "
                                     "tensor inside, to see them)")
    node.input.extend(inputs)
    node.output.extend(outputs)
    node.attribute.extend([onnx.helper.make_attribute("blocks", f"{run.label} ({run.blocks} identical)"),
                           onnx.helper.make_attribute("nodes", len(run.nodes))])
    return node


def collapsed_op_type(run: CollapsedRun) -> str:
    """'layers 1-19 collapsed': what Netron writes in the placeholder's header (no dots: Netron
    shows only what follows the last one; short: it abbreviates longer ones)."""
    return f"{run.short.replace('.', ' ')} {run.first}-{run.last} {COLLAPSED_WORD}"
