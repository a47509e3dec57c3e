"""The upstream cone of a focused preview with each collapsed run contracted to one unit.

Why apart from `focus`: the walk that keeps whole levels of nodes (hops from the seeds) and the
order the kept units are written in are graph work of their own, on plain lists.

Units are node positions (>= 0) and, for the k-th collapsed run, -1 - k. A run's unit reads what
its nodes read from outside the run, minus weights (initializers, parameters: the collapsed layers'
weights would only clutter the drawing), and makes what nodes outside it read.
- `levels(seeds, budget)`: whole levels of units upstream of the seeds while what Netron draws of
  them fits (`drawn`: a Constant costs nothing, Netron draws it inside its reader);
- `topological(kept)`: the kept units in an order where each comes after what it reads (graph order
  where free), None if contracting made a cycle.
"""

from __future__ import annotations

import heapq

from onnxport.core.graph.focus_blocks import CollapsedRun
from onnxport.core.graph.graph_table import GraphTable


class ContractedCone:
    """See the module docstring."""

    def __init__(self, table: GraphTable, up: set[int], runs: list[CollapsedRun], weights: set[str]) -> None:
        self.table, self.runs = table, runs
        self.of: dict[int, int] = {i: -1 - k for k, run in enumerate(runs) for i in run.nodes}
        self.inputs: dict[int, list[str]] = {}
        self.outputs: dict[int, list[str]] = {}
        self.position: dict[int, int] = {}
        outside_reads = {t for i in up if i not in self.of for t in table.uses[i]}
        for k, run in enumerate(runs):
            unit = -1 - k
            made = {o for i in run.nodes for o in table.outputs[i] if o}
            ins = dict.fromkeys(t for i in run.nodes for t in table.uses[i] if t not in made and t not in weights)
            self.inputs[unit] = list(ins)
            self.outputs[unit] = [o for i in run.nodes for o in table.outputs[i] if o in outside_reads]
            self.position[unit] = run.nodes[0]

    def uses(self, unit: int) -> list[str]:
        return self.inputs[unit] if unit < 0 else self.table.uses[unit]

    def producer(self, tensor: str) -> int | None:
        i = self.table.producer.get(tensor)
        return None if i is None else self.of.get(i, i)

    def drawn(self, units) -> int:
        """Nodes Netron draws for `units` (a Constant node is drawn inside the node reading it)."""
        ops = self.table.ops
        return sum(1 for u in units if u < 0 or ops[u] != "Constant")

    def levels(self, seeds: list[str], budget: int) -> tuple[list[int], int | None]:
        """Whole levels of units upstream of `seeds` while they fit in `budget` drawn nodes (at
        least some of the first); the hops kept, None when nothing was left out."""
        frontier = list(dict.fromkeys(u for u in map(self.producer, seeds) if u is not None))
        seen = set(frontier)
        kept: list[int] = []
        size = hops = 0
        while frontier:
            size += self.drawn(frontier)
            if size > budget:
                if not kept:
                    kept = frontier[:max(budget, 1)]
                    hops = 1
                return kept, hops
            kept += frontier
            hops += 1
            following = []
            for u in frontier:
                for t in self.uses(u):
                    p = self.producer(t)
                    if p is not None and p not in seen:
                        seen.add(p)
                        following.append(p)
            frontier = following
        return kept, None

    def topological(self, kept: list[int]) -> list[int] | None:
        """`kept` in an order where every unit comes after what it reads (graph order where free);
        None if there is a cycle."""
        keep = set(kept)
        pos = self.position
        needs: dict[int, int] = {}
        users: dict[int, list[int]] = {}
        for u in kept:
            producers = {p for p in map(self.producer, self.uses(u)) if p is not None and p in keep and p != u}
            needs[u] = len(producers)
            for p in producers:
                users.setdefault(p, []).append(u)
        ready = [(pos.get(u, u), u) for u in kept if not needs[u]]
        heapq.heapify(ready)
        order = []
        while ready:
            _, u = heapq.heappop(ready)
            order.append(u)
            for v in users.get(u, ()):
                needs[v] -= 1
                if not needs[v]:
                    heapq.heappush(ready, (pos.get(v, v), v))
        return order if len(order) == len(kept) else None
