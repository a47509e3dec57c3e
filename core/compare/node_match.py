"""Which node of graph B is which node of graph A, when names cannot be trusted (quantizers rename
and insert, optimisers fuse): nodes match by their place in the graph and their op:
- anchors: graph inputs (by name, then by position), weights (by name, then by content where the
  content is unique on both sides) and graph outputs; then nodes at the same place in both node
  lists, and nodes of one name and op, that read the very same matched inputs;
- forward, in A's topological order: a node matches the unmatched node of B with the same op that
  reads the most of the same (matched) tensors, seen through pass-through copies (Q/DQ, Cast,
  Identity: `graph_view.root`); a tie is left for later unless the name settles it;
- backward, consumers first: the producers of the same input slot of two matched nodes match when
  their ops agree, and two weights read at the same slot pair up (a changed weight keeps its place);
- then forward taking the first of tied candidates, forward looking past a node one side lacks (a
  fused activation), and last equal (name, op) pairs; repeated until nothing changes.
Contract: `match_graphs(a, b, ...)` returns a `Matching` (node maps both ways, tensors A -> B); a
round is linear in the graph's size (candidates per node are capped).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush

from onnxport.core.compare.graph_view import GraphView

CANDIDATES = 64  # nodes of B scored per node of A at most
ROUNDS = 8
STRICT, LENIENT, SKIPPING = "strict", "lenient", "skipping"


@dataclass
class Matching:
    """Nodes and tensors of A paired with B's (matched nodes share their op)."""

    a: GraphView
    b: GraphView
    nodes: dict[int, int] = field(default_factory=dict)  # A node -> B node
    back: dict[int, int] = field(default_factory=dict)  # B node -> A node
    tensors: dict[str, str] = field(default_factory=dict)  # A tensor -> B tensor
    tensors_back: dict[str, str] = field(default_factory=dict)
    anchors: list[tuple[str, str]] = field(default_factory=list)  # pairs known before any node matched, made by nodes
    walked: set[int] = field(default_factory=set)  # matched nodes of A whose inputs `_backward` paired
    unwalked: list[int] = field(default_factory=list)  # matched since `_backward` last ran
    same: set[int] = field(default_factory=set)  # matched nodes of A reading the very inputs B's node reads
    identical: set[int] = field(default_factory=set)  # of `same`: also one op, attributes, outputs' count

    def pair_tensors(self, ta: str, tb: str) -> bool:
        if not ta or not tb or ta in self.tensors or tb in self.tensors_back:
            return False
        self.tensors[ta], self.tensors_back[tb] = tb, ta
        return True

    def pair_nodes(self, ia: int, ib: int) -> None:
        self.nodes[ia], self.back[ib] = ib, ia
        self.unwalked.append(ia)
        tensors, back = self.tensors, self.tensors_back
        for ta, tb in zip(self.a.outputs[ia], self.b.outputs[ib]):
            if ta and tb and ta not in tensors and tb not in back:
                tensors[ta], back[tb] = tb, ta

    def mapped_root(self, tensor: str) -> str | None:
        """The root in B of what A's `tensor` is matched to (directly, or through its root)."""
        tb = self.tensors.get(tensor)
        if tb is None:
            tb = self.tensors.get(self.a.root(tensor))
            if tb is None:
                return None
        return self.b.root(tb)


def match_graphs(a: GraphView, b: GraphView, weight_pairs: Callable[[Matching], None],
                 is_weight: Callable[[str, str], bool], outer: dict[str, str] | None = None) -> Matching:
    """See the module docstring. `weight_pairs(m)` pairs the weights (by name, then content) into
    `m`; `is_weight(ta, tb)` says whether two unmatched tensors are both weights; `outer`: the
    pairs already known for the names a body reads from the graphs around it."""
    m = Matching(a, b)
    for ta, tb in (outer or {}).items():
        m.pair_tensors(ta, tb)
    _anchor_names(m, a.graph_inputs, b.graph_inputs)
    weight_pairs(m)
    _anchor_outputs(m)
    m.anchors = [(ta, tb) for ta, tb in m.tensors.items() if ta in a.producer and tb in b.producer]
    _same_places(m)
    _same_names(m)
    for _ in range(ROUNDS):
        changed = _forward(m, STRICT) + _backward(m, is_weight)
        if not changed:
            changed = _forward(m, LENIENT) + _backward(m, is_weight)
        if not changed:
            changed = _forward(m, SKIPPING) + _backward(m, is_weight)
        if not changed:
            changed = _by_name(m) + _backward(m, is_weight)
        if not changed:
            break
    return m


def _anchor_names(m: Matching, names_a: list[str], names_b: list[str]) -> None:
    """Pair equal names, then the rest by position when as many are left on both sides."""
    in_b = set(names_b)
    for name in names_a:
        if name in in_b:
            m.pair_tensors(name, name)
    left_a = [n for n in names_a if n not in m.tensors]
    left_b = [n for n in names_b if n not in m.tensors_back]
    if len(left_a) == len(left_b):
        for ta, tb in zip(left_a, left_b):
            m.pair_tensors(ta, tb)


def _anchor_outputs(m: Matching) -> None:
    """Graph outputs: one side's output named like a tensor of the other (an export's output is a
    tensor of its eval graph), then the remaining outputs by position."""
    a, b = m.a, m.b
    for name in b.graph_outputs:
        if name in a.producer or name in a.graph_inputs:
            m.pair_tensors(name, name)
    for name in a.graph_outputs:
        if name in b.producer or name in b.graph_inputs:
            m.pair_tensors(name, name)
    left_a = [n for n in a.graph_outputs if n not in m.tensors]
    left_b = [n for n in b.graph_outputs if n not in m.tensors_back]
    if left_a and len(left_a) == len(left_b):
        for ta, tb in zip(left_a, left_b):
            m.pair_tensors(ta, tb)


def _complete(m: Matching) -> bool:
    """Every node of one side is matched: nothing is left to pair nodes with."""
    return len(m.nodes) == len(m.a) or len(m.back) == len(m.b)


def _reads_same(m: Matching, ia: int, ib: int) -> bool:
    """Every input of `ia` is matched to the very input `ib` reads, slot by slot."""
    ins_a, ins_b, tensors = m.a.inputs[ia], m.b.inputs[ib], m.tensors
    return len(ins_a) == len(ins_b) and all(tensors.get(ta) == tb if ta else not tb for ta, tb in zip(ins_a, ins_b))


def _same_places(m: Matching) -> None:
    """Node i of A and node i of B, in graph order, when they are the same node under other names:
    one op, the very inputs (at least one: a Constant is placed by its weight), outputs unpaired
    or paired to each other, equal attributes, and names equal or each unknown to the other side
    (else `_same_names` decides). A converter that renumbers, or a re-export, pairs here in one
    linear pass (written out flat: it visits every node); the rest goes to the passes below."""
    a, b = m.a, m.b
    ops_a, ops_b, names_a, names_b, attrs_a, attrs_b = a.ops, b.ops, a.names, b.names, a.attributes, b.attributes
    ins_a, in_a, ins_b, in_b = a.inputs.flat, a.inputs.starts, b.inputs.flat, b.inputs.starts
    outs_a, out_a, outs_b, out_b = a.outputs.flat, a.outputs.starts, b.outputs.flat, b.outputs.starts
    known_a, known_b = set(names_a), set(names_b)
    tensors, back = m.tensors, m.tensors_back
    get = tensors.get
    paired = []
    for i in range(min(len(ops_a), len(ops_b))):
        start, stop, start_b = in_a[i], in_a[i + 1], in_b[i]
        if ops_a[i] != ops_b[i] or start == stop or stop - start != in_b[i + 1] - start_b:
            continue
        reads = ins_b[start_b:start_b + stop - start]
        if list(map(get, ins_a[start:stop])) != reads and ("" not in reads or not _reads_same(m, i, i)):
            continue
        name, name_b = names_a[i], names_b[i]
        if name != name_b and (name in known_b or name_b in known_a):
            continue
        made, made_b = outs_a[out_a[i]:out_a[i + 1]], outs_b[out_b[i]:out_b[i + 1]]
        if len(made) != len(made_b) or not _free_or_paired(tensors, back, made, made_b):
            continue
        if (attrs_a[i] or attrs_b[i]) and (attrs_a[i] != attrs_b[i] or a.node(i).attribute != b.node(i).attribute):
            continue
        paired.append(i)
        for ta, tb in zip(made, made_b):  # `pair_nodes`, written out
            if ta and tb and ta not in tensors:
                tensors[ta], back[tb] = tb, ta
    m.nodes.update(zip(paired, paired))
    m.back.update(zip(paired, paired))
    m.walked.update(paired)  # inputs paired already: nothing left for `_backward`
    m.same.update(paired)
    m.identical.update(paired)


def _free_or_paired(tensors: dict[str, str], back: dict[str, str], made: list[str], made_b: list[str]) -> bool:
    """Each output of A is paired to B's at its slot, or neither is paired yet."""
    for ta, tb in zip(made, made_b):
        paired = tensors.get(ta)
        if paired != tb if paired is not None else tb in back:
            return False
    return True


def _same_names(m: Matching) -> None:
    """The cheap pass, in A's order: a node whose (name, op) is unique in B and whose every input
    is already matched to the very input B's node reads is that node."""
    if _complete(m):
        return
    a, b = m.a, m.b
    named: dict[tuple[str, str], int] = {}
    for ib, name in enumerate(b.names):
        if name:
            key = (name, b.ops[ib])
            named[key] = -1 if key in named else ib
    for ia in a.order:
        name = a.names[ia]
        ib = named.get((name, a.ops[ia]), -1) if name and ia not in m.nodes else -1
        if ib < 0 or ib in m.back:
            continue
        if _reads_same(m, ia, ib):
            m.pair_nodes(ia, ib)
            m.walked.add(ia)  # inputs paired already: nothing left for `_backward`
            m.same.add(ia)


def _forward(m: Matching, mode: str) -> int:
    if _complete(m):
        return 0
    a, nodes, mapped_root = m.a, m.nodes, m.mapped_root
    found = 0
    for ia in [i for i in a.order if i not in nodes]:
        roots = set()
        for t in a.inputs[ia]:
            if t:
                r = mapped_root(t)
                if r is not None:
                    roots.add(r)
        if mode == SKIPPING:
            roots |= _skipped_roots(m, ia)
        if not roots:
            continue
        ib = _best(m, ia, roots, mode)
        if ib is not None:
            m.pair_nodes(ia, ib)
            found += 1
    return found


def _skipped_roots(m: Matching, ia: int) -> set[str]:
    """Roots one unmatched node upstream of `ia` (a node B lacks: an activation fused away)."""
    a = m.a
    roots = set()
    for t in a.inputs[ia]:
        made = a.made(t)
        if t and made is not None and made[0] not in m.nodes:
            roots |= {r for u in a.inputs[made[0]] if u and (r := m.mapped_root(u)) is not None}
    return roots


def _candidates(m: Matching, ia: int, roots: set[str], mode: str) -> list[int]:
    b, op, back, reach = m.b, m.a.ops[ia], m.back, m.b.reach
    lists = [reach.get(r, ()) for r in sorted(roots)]  # sorted: a tie never follows a set's hash order
    first = min(lists, key=len)
    pool = list(first[:CANDIDATES])
    if mode == SKIPPING:  # also past one unmatched node of B (a node A lacks)
        for ib in list(pool):
            if ib not in back:
                for t in b.outputs[ib]:
                    pool.extend(reach.get(b.root(t), [])[:CANDIDATES] if t else [])
        for other in lists:
            if other is not first:
                pool.extend(other[:CANDIDATES])
    ops = b.ops
    return [ib for ib in dict.fromkeys(pool) if ib not in back and ops[ib] == op]


def _best(m: Matching, ia: int, roots: set[str], mode: str) -> int | None:
    a, b = m.a, m.b
    root, name = b.root, a.names[ia]
    candidates = _candidates(m, ia, roots, mode)
    if len(candidates) == 1 and mode != SKIPPING:
        return candidates[0]  # it reads a root `ia` reads: that is how it was found
    scored = []
    for ib in candidates:
        reads = {root(t) for t in b.inputs[ib] if t}
        if mode == SKIPPING:
            reads |= {root(u) for t in b.inputs[ib] if t and (p := b.made(t)) and p[0] not in m.back
                      for u in b.inputs[p[0]] if u}
        shared = len(roots & reads)
        if shared:
            scored.append((shared + (0.5 if name and name == b.names[ib] else 0.0), ib))
    if not scored:
        return None
    if len(scored) == 1:
        return scored[0][1]
    top = max(s for s, _ in scored)
    tied = [ib for s, ib in scored if s == top]
    if len(tied) > 1 and mode == STRICT:
        return None
    return tied[0]


def _backward(m: Matching, is_weight: Callable[[str, str], bool]) -> int:
    """Producers of the same input slot of matched nodes, consumers first; then the producers of
    matched tensors (the anchors: outputs, weights held in Constant nodes)."""
    a, b = m.a, m.b
    todo = [ia for ia in m.unwalked if ia not in m.walked]
    m.unwalked.clear()
    rank = a.rank if todo else []
    heap = [(-rank[ia], ia) for ia in todo]
    heapify(heap)
    found = 0
    while heap:  # a pair's inputs are walked once: what fails now fails for good
        ia = heappop(heap)[1]
        if ia in m.walked:
            continue
        m.walked.add(ia)
        ib = m.nodes[ia]
        for ta, tb in zip(a.inputs[ia], b.inputs[ib]):
            if not ta or not tb or ta in m.tensors or tb in m.tensors_back:
                continue
            pa, pb = a.made(ta), b.made(tb)
            if pa is None and pb is None:
                if is_weight(ta, tb):
                    m.pair_tensors(ta, tb)
            elif pa is not None and pb is not None:
                found += _pair_producers(m, pa, pb)
        for new in m.unwalked:  # producers paired just now: walked in this sweep, in order
            heappush(heap, (-rank[new], new))
        m.unwalked.clear()
    for ta, tb in m.anchors:
        pa, pb = a.made(ta), b.made(tb)
        if pa is not None and pb is not None:
            found += _pair_producers(m, pa, pb)
    return found


def _pair_producers(m: Matching, pa: tuple[int, int], pb: tuple[int, int]) -> int:
    (ia, slot_a), (ib, slot_b) = pa, pb
    if ia in m.nodes or ib in m.back or slot_a != slot_b or m.a.ops[ia] != m.b.ops[ib]:
        return 0
    m.pair_nodes(ia, ib)
    return 1


def _by_name(m: Matching) -> int:
    if _complete(m):
        return 0
    a, b = m.a, m.b
    left: dict[tuple[str, str], list[int]] = {}
    for ib, name in enumerate(b.names):
        if name and ib not in m.back:
            left.setdefault((name, b.ops[ib]), []).append(ib)
    found = 0
    for ia, name in enumerate(a.names):
        if name and ia not in m.nodes:
            same = left.get((name, a.ops[ia]))
            if same and len(same) == 1 and same[0] not in m.back:
                m.pair_nodes(ia, same[0])
                found += 1
    return found
