"""Model-local functions that call themselves or expand past a bound: refused on load.

Why: ONNX functions are macros, expanded in place; a function that calls itself (directly or
through others) has no expansion. ONNX Runtime refuses such a model when it loads it, yet export
wrote one with exit 0, and whatever inlines it never ends. Calls multiply: 48 functions each
calling the next twice are 3.8 KB on disk and 2^47 nodes expanded (inference and ORT never end).

Contract: `check_function_calls(model, prefix)` raises `CorruptFileError` ("<prefix>model-local
function 'd:F' calls itself (F -> G -> F)...") when the call graph of `model.functions` (nodes
in function bodies and in their If/Loop/Scan bodies, matched by domain, name and overload) has a
cycle, and ("<prefix>model-local function 'd:F' expands to N nodes...") when the main graph,
every call inlined, would hold more than `budgets.function_expansion_limit(stored nodes)`. Each function is
counted once (memoised): O(functions + nodes); iterative, so no depth is too deep.
`expanded_nodes(model)` is that count (shape_infer sizes its work by it).
"""

from __future__ import annotations

from collections import Counter

import onnx

from onnxport.core.util.budgets import function_expansion_limit
from onnxport.core.util.errors import CorruptFileError

_SHOWN = 6  # functions of a cycle named in the message
Key = tuple[str, str, str]


def _key(domain: str, name: str, overload: str) -> Key:
    return ("" if domain == "ai.onnx" else domain, name, overload)


def _calls(nodes) -> Counter[Key]:
    """How many times each (domain, op, overload) is used by `nodes` and the nodes of their
    If/Loop/Scan bodies at any depth (one C-level pass per list of nodes; no recursion)."""
    raw: Counter[tuple[str, str, str]] = Counter()
    stack = [nodes]
    while stack:
        batch = stack.pop()
        raw.update([(n.domain, n.op_type, n.overload) for n in batch])
        for node in batch:
            if node.attribute:
                for attr in node.attribute:
                    if attr.HasField("g"):
                        stack.append(attr.g.node)
                    stack.extend(g.node for g in attr.graphs)
    counts: Counter[Key] = Counter()
    for (domain, name, overload), n in raw.items():
        counts[_key(domain, name, overload)] += n
    return counts


def _shown(key: Key) -> str:
    domain, name, overload = key
    return f"{domain + ':' if domain else ''}{name}{':' + overload if overload else ''}"[:120]


def check_function_calls(model: onnx.ModelProto, prefix: str = "") -> None:
    """See the module docstring."""
    if model.functions:
        expanded_nodes(model, prefix)


def expanded_nodes(model: onnx.ModelProto, prefix: str = "") -> int:
    """Nodes of the main graph once every local function call is inlined (bodies included where
    there are functions; the graph's own node count where there are none): what inference costs.
    Raises as `check_function_calls` does."""
    if not model.functions:
        return len(model.graph.node)
    calls: dict[Key, Counter[Key]] = {}
    own: Counter[Key] = Counter()  # nodes a function's body stores (bodies included)
    for fn in model.functions:
        key = _key(fn.domain, fn.name, fn.overload)
        used = _calls(fn.node)
        calls.setdefault(key, Counter()).update(used)
        own[key] += sum(used.values())
    for key in calls:
        calls[key] = Counter({k: n for k, n in calls[key].items() if k in calls})
    sizes = _expanded_sizes(calls, own, prefix)
    graph_calls = _calls(model.graph.node)
    stored = sum(graph_calls.values()) + sum(own.values())
    total = sum(n * (1 + sizes.get(k, 0)) for k, n in graph_calls.items())
    limit = function_expansion_limit(stored)
    if total > limit:
        biggest = max((k for k in graph_calls if k in sizes), key=sizes.__getitem__)
        raise CorruptFileError(f"{prefix}model-local function '{_shown(biggest)}' expands to {sizes[biggest]:,} "
                               f"nodes once inlined (the graph to {total:,}; at most {limit:,} are accepted)")
    return total


def _expanded_sizes(calls: dict[Key, Counter[Key]], own: Counter[Key], prefix: str) -> dict[Key, int]:
    """Nodes each function holds once its calls are inlined, depth first; a cycle is refused."""
    sizes: dict[Key, int] = {}
    state: dict[Key, int] = {}  # 1 on the path, 2 done
    for root in calls:
        if root in state:
            continue
        path, todo = [root], [iter(calls[root])]
        state[root] = 1
        while todo:
            callee = next(todo[-1], None)
            if callee is None:
                done = path.pop()
                state[done] = 2
                sizes[done] = own[done] + sum(n * sizes[k] for k, n in calls[done].items())
                todo.pop()
                continue
            seen = state.get(callee)
            if seen == 1:
                cycle = path[path.index(callee):] + [callee]
                chain = " -> ".join(_shown(k) for k in cycle[:_SHOWN]) + (" ..." if len(cycle) > _SHOWN else "")
                raise CorruptFileError(f"{prefix}model-local function '{_shown(callee)}' calls itself ({chain}); "
                                       f"functions are expanded in place and cannot recurse")
            if seen is None:
                state[callee] = 1
                path.append(callee)
                todo.append(iter(calls[callee]))
    return sizes
