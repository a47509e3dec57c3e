"""Model-local functions that call themselves: refused on load.

Why: ONNX functions are macros, expanded in place; a function that calls itself (directly or
through others) has no expansion. ONNX Runtime refuses such a model when it loads it, yet export
wrote one with exit 0, and whatever inlines it never ends.

Contract: `check_function_calls(model, prefix)` raises `CorruptFileError` ("<prefix>model-local
function 'd:F' calls itself (F -> G -> F)...") when the call graph of `model.functions` (nodes
in function bodies and in their If/Loop/Scan bodies, matched by domain, name and overload) has a
cycle. O(functions + nodes); iterative, so no depth is too deep.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import onnx

from onnxport.core.util.errors import CorruptFileError

_SHOWN = 6  # functions of a cycle named in the message
Key = tuple[str, str, str]


def _key(domain: str, name: str, overload: str) -> Key:
    return ("" if domain == "ai.onnx" else domain, name, overload)


def _called(nodes: Iterable[onnx.NodeProto]) -> Iterator[Key]:
    stack = [iter(nodes)]
    while stack:
        node = next(stack[-1], None)
        if node is None:
            stack.pop()
            continue
        yield _key(node.domain, node.op_type, getattr(node, "overload", ""))
        for attr in node.attribute:
            if attr.HasField("g"):
                stack.append(iter(attr.g.node))
            for g in attr.graphs:
                stack.append(iter(g.node))


def _shown(key: Key) -> str:
    domain, name, overload = key
    return f"{domain + ':' if domain else ''}{name}{':' + overload if overload else ''}"[:120]


def check_function_calls(model: onnx.ModelProto, prefix: str = "") -> None:
    """See the module docstring."""
    if not model.functions:
        return
    calls: dict[Key, list[Key]] = {}
    for fn in model.functions:
        key = _key(fn.domain, fn.name, getattr(fn, "overload", ""))
        calls.setdefault(key, []).extend(_called(fn.node))
    for key in calls:
        calls[key] = [k for k in dict.fromkeys(calls[key]) if k in calls]
    state: dict[Key, int] = {}  # 1 on the path, 2 done
    for root in calls:
        if root in state:
            continue
        path, todo = [root], [iter(calls[root])]
        state[root] = 1
        while todo:
            callee = next(todo[-1], None)
            if callee is None:
                state[path.pop()] = 2
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
