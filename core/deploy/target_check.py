"""A deploy artifact checked against the opset it declares, node by node, before anything is written.

Why: the ONNX Runtime installed here reads any opset, so running the artifact proves nothing about
an older release: `deploy --target ort-1.14` wrote a model declaring opset 18 that holds `Pad
mode=wrap` (Pad-19 only), and onnx.version_converter keeps such values when it converts down.
Contract: `target_problem(model)` -> None, or one line naming the first node of the ai.onnx or
ai.onnx.ml domain (every graph, subgraphs and local functions included) that its declared opset
cannot express: an op with no schema there (or a deprecated one), an attribute that schema lacks
or types otherwise, a required attribute missing, an input or output count outside its bounds, a
string attribute value that version does not admit. Admitted values come from the schemas
themselves: a value the op's schemas name for that attribute (quoted in a description) in some
version but not in this version's description is refused (Pad mode=wrap before 19, Scatter*
reduction=max before 18, GridSample mode=linear before 20); a value no version names is left to
the checks that follow (ORT's load).
"""

from __future__ import annotations

import functools
import re

import onnx
from onnx import defs

from onnxport.core.util.text import shown

DOMAINS = {"": "", "ai.onnx": "", "ai.onnx.ml": "ai.onnx.ml"}  # node domain -> schema domain
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAMED = re.compile(r'`"?([A-Za-z_]\w*)"?`|"([A-Za-z_]\w*)"|\'([A-Za-z_]\w*)\'')


@functools.cache
def _history() -> dict[tuple[str, str], list[defs.OpSchema]]:
    """(domain, op) -> its schemas, oldest first."""
    table: dict[tuple[str, str], list[defs.OpSchema]] = {}
    for schema in defs.get_all_schemas_with_history():
        table.setdefault((schema.domain, schema.name), []).append(schema)
    for schemas in table.values():
        schemas.sort(key=lambda s: s.since_version)
    return table


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text))


@functools.cache
def _named_values(domain: str, op: str, attr: str) -> frozenset[str]:
    """The values any version of `op`'s schema names for `attr` (quoted in its description)."""
    named: set[str] = set()
    for schema in _history().get((domain, op), []):
        if attr in schema.attributes:
            named |= {a or b or c for a, b, c in _NAMED.findall(schema.attributes[attr].description)}
    return frozenset(named)


def _first_admitting(domain: str, op: str, attr: str, value: str) -> int | None:
    for schema in _history().get((domain, op), []):
        if attr in schema.attributes and value in _words(schema.attributes[attr].description):
            return schema.since_version
    return None


def _attribute_problem(node: onnx.NodeProto, schema: defs.OpSchema, domain: str) -> str | None:
    given = {a.name: a for a in node.attribute}
    for name, attr in given.items():
        spec = schema.attributes.get(name)
        if spec is None:
            return f"has no attribute '{shown(name)}'"
        if int(spec.type) != attr.type and not attr.ref_attr_name:
            return f"takes attribute '{name}' as {spec.type.name}, not {onnx.AttributeProto.AttributeType.Name(attr.type)}"
        if attr.type == onnx.AttributeProto.STRING and not attr.ref_attr_name:
            value = attr.s.decode("utf-8", "replace")
            if value in _named_values(domain, node.op_type, name) and value not in _words(spec.description):
                since = _first_admitting(domain, node.op_type, name, value)
                return f"does not admit {name}='{shown(value)}'" + (f" (it does from opset {since})" if since else "")
    missing = [n for n, spec in schema.attributes.items() if spec.required and n not in given]
    return f"needs attribute '{missing[0]}'" if missing else None


def _count_problem(node: onnx.NodeProto, schema: defs.OpSchema) -> str | None:
    inputs = len(node.input)
    while inputs and not node.input[inputs - 1]:
        inputs -= 1  # trailing optional inputs left out
    if not schema.min_input <= inputs <= schema.max_input:
        return f"takes {schema.min_input}-{schema.max_input} inputs, not {inputs}"
    if not schema.min_output <= len(node.output) <= schema.max_output:
        return f"gives {schema.min_output}-{schema.max_output} outputs, not {len(node.output)}"
    return None


def node_problem(node: onnx.NodeProto, opsets: dict[str, int]) -> str | None:
    """Why `node` cannot be expressed at the opsets `opsets` (schema domain -> version); None if it can
    (or its domain is not ONNX's own)."""
    domain = DOMAINS.get(node.domain)
    if domain is None:
        return None
    opset = opsets.get(domain)
    name = node.name or (node.output[0] if node.output else "")
    label = f"node '{shown(name)}' ({node.op_type})"
    where = f"{domain or 'ai.onnx'} opset {opset}"
    if opset is None:
        return f"{label}: the model declares no {domain or 'ai.onnx'} opset"
    try:
        schema = defs.get_schema(node.op_type, opset, domain)
    except defs.SchemaError:
        return f"{label}: no such op at {where}"
    if schema.deprecated:
        return f"{label}: deprecated at {where} (since {schema.since_version})"
    why = _attribute_problem(node, schema, domain) or _count_problem(node, schema)
    return f"{label}: {node.op_type}-{schema.since_version} (at {where}) {why}" if why else None


def _opsets(imports) -> dict[str, int]:
    return {DOMAINS[o.domain]: o.version for o in imports if o.domain in DOMAINS}


def _nodes(nodes):
    """`nodes` and the nodes of their subgraphs (If, Loop, Scan bodies), at any depth."""
    for node in nodes:
        yield node
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                yield from _nodes(sub.node)


def target_problem(model: onnx.ModelProto) -> str | None:
    """See the module docstring."""
    opsets = _opsets(model.opset_import)
    for node in _nodes(model.graph.node):
        if (why := node_problem(node, opsets)) is not None:
            return why
    for function in model.functions:
        own = {**opsets, **_opsets(function.opset_import)}
        for node in _nodes(function.node):
            if (why := node_problem(node, own)) is not None:
                return f"in function '{shown(function.name)}': {why}"
    return None
