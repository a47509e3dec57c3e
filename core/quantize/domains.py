"""Declare only the operator domains a model uses.

Why: ONNX Runtime's quantizers add `com.microsoft`, `ai.onnx.ml`, `ai.onnx.training`... to every
model they write, used or not (seven unused domains on a quantized OCR model), which tools that
check domains refuse and readers have to wonder about.

Contract (both checked passes, passes.py; `domains(result)` names the domains): `drop_unused_domains`
removes, in place, each `opset_import` entry whose domain no node uses (main graph, sub-graph
bodies at any depth, and model-local functions that are called); the default domain stays.
`declare_used_domains(model)` adds the missing declaration of a domain the nodes use (ONNX
Runtime's quantizer, quantizing inside If/Loop/Scan bodies, writes `com.microsoft` ops there but
declares the domain only in the body's throwaway model: onnx.checker refuses the file).
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx

from onnxport.core.graph.passes import PassResult
from onnxport.core.graph.uses import bodies
from onnxport.core.quantize.passes import checked

_DEFAULT = ("", "ai.onnx")
DOMAIN_VERSIONS = {"com.microsoft": 1, "ai.onnx.ml": 1, "ai.onnx.preview.training": 1}
DROPPED, DECLARED = "domain dropped (no node uses it): ", "domain declared (a node uses it): "


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for _, body in bodies(node):
            yield from _all_nodes(body)


def used_domains(model: onnx.ModelProto) -> set[str]:
    functions = {(f.domain, f.name): f for f in model.functions}
    used: set[str] = set()
    pending = list(_all_nodes(model.graph))
    seen: set[tuple[str, str]] = set()
    while pending:
        node = pending.pop()
        used.add(node.domain)
        key = (node.domain, node.op_type)
        if key in functions and key not in seen:
            seen.add(key)
            for inner in functions[key].node:
                pending.append(inner)
                pending.extend(n for _, body in bodies(inner) for n in _all_nodes(body))
    return used


def domains(result: PassResult) -> list[str]:
    """The domains a domain pass dropped or declared, in order."""
    return [note.partition(": ")[2] for note in result.notes]


@checked
def drop_unused_domains(model: onnx.ModelProto) -> PassResult:
    """See the module docstring."""
    used = used_domains(model)
    removed = [o.domain for o in model.opset_import if o.domain not in used and o.domain not in _DEFAULT]
    if removed:
        kept = [o for o in model.opset_import if o.domain in used or o.domain in _DEFAULT]
        copies = []
        for o in kept:
            c = onnx.OperatorSetIdProto()
            c.CopyFrom(o)
            copies.append(c)
        del model.opset_import[:]
        model.opset_import.extend(copies)
    return PassResult(model, changed=bool(removed), notes=[DROPPED + d for d in removed])


@checked
def declare_used_domains(model: onnx.ModelProto) -> PassResult:
    """See the module docstring."""
    declared = {o.domain for o in model.opset_import}
    added = sorted(d for d in used_domains(model) - declared if d not in _DEFAULT and d in DOMAIN_VERSIONS)
    for domain in added:
        model.opset_import.add(domain=domain, version=DOMAIN_VERSIONS[domain])
    return PassResult(model, changed=bool(added), notes=[DECLARED + d for d in added])
