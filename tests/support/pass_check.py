"""The pass contract (`passes`), checked: run a pass and verify what it says against what it did.

Contract: `check_pass(run, model, *args, **kwargs)` calls `run(model, *args, **kwargs)` and
raises `PassContractError` (every broken rule, one line each) unless
- the result is a `PassResult` whose `model` is the model given (edited in place);
- `changed` is True exactly when the serialized model differs from a copy taken before, and an
  unchanged model reports no changes and no notes;
- the node changes add up, node label by label, across If/Loop/Scan bodies too: a REMOVED or
  FOLDED node was there and is gone, an ADDED one is there, a REWRITTEN one is there before and
  after; a node that differs has a change, one per node (reading past a REMOVED node, its input
  renamed to what the removed node read, is part of that removal);
- the result passes onnx.checker if the model given did (small graphs; weights that live beside
  the model, `beside=`, are added on both sides; a result's `constants` replace them after).
Made for tests and debugging: it copies the model; products run the passes themselves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import onnx
from onnx import numpy_helper

from onnxport.core.graph.const_tensors import ConstTensor
from onnxport.core.graph.passes import (
    ACTIONS,
    ADDED,
    FOLDED,
    REMOVED,
    REWRITTEN,
    NodeChange,
    PassResult,
    node_label,
)
from onnxport.core.graph.uses import bodies
from onnxport.core.graph.weightless import HEADER_FIELDS, beyond_header
from onnxport.core.io.parameter_set import np_dtype_for

CHECKER_MAX_BYTES = 64 << 20  # onnx.checker runs on graphs this small (it copies them)


class PassContractError(AssertionError):
    """A pass broke its contract; the message lists every rule broken."""


def check_pass(run: Callable[..., PassResult], model: onnx.ModelProto, *args,
               beside: Mapping[str, ConstTensor] | None = None, **kwargs) -> PassResult:
    """Run the pass `run` on `model` and check its contract (see the module docstring); returns
    its result. `beside`: the weights of a weight-free model (not passed to the pass)."""
    before = onnx.ModelProto()
    before.CopyFrom(model)
    before_bytes = before.SerializeToString(deterministic=True)
    result = run(model, *args, **kwargs)
    broken: list[str] = []
    if not isinstance(result, PassResult):
        raise PassContractError(f"{_name(run)} returned {type(result).__name__}, not a PassResult")
    if result.model is not model:
        broken.append("result.model is not the model given (a pass edits in place)")
    differs = model.SerializeToString(deterministic=True) != before_bytes
    if result.changed != differs:
        broken.append(f"changed={result.changed} but the model {'differs' if differs else 'is the same'}")
    if not differs and (result.changes or result.notes):
        broken.append(f"the model is the same but {len(result.changes)} change(s) and "
                      f"{len(result.notes)} note(s) are reported")
    broken += node_changes_broken(before, model, result.changes)
    if not broken and differs:
        broken += _validity_broken(before, model, beside, getattr(result, "constants", None))
    if broken:
        raise PassContractError(f"{_name(run)} breaks the pass contract:\n  " + "\n  ".join(broken))
    return result


def node_changes_broken(before: onnx.ModelProto, after: onnx.ModelProto, changes: list[NodeChange]) -> list[str]:
    """The rules about `changes` that the nodes of `before` and `after` contradict."""
    broken = [f"{c!r} is not a NodeChange with an action of {ACTIONS}" for c in changes
              if not isinstance(c, NodeChange) or c.action not in ACTIONS]
    changes = [c for c in changes if isinstance(c, NodeChange) and c.action in ACTIONS]
    old, new = _by_label(before.graph), _by_label(after.graph)
    acted: dict[str, Counter] = {}
    for c in changes:
        acted.setdefault(c.node, Counter())[c.action] += 1
    for label, count in acted.items():
        had, has = len(old.get(label, ())), len(new.get(label, ()))
        if (count[REMOVED] or count[FOLDED] or count[REWRITTEN]) and not had:
            broken.append(f"node '{label}' is reported {_actions(count)} but was not in the graph")
        if (count[ADDED] or count[REWRITTEN]) and not has:
            broken.append(f"node '{label}' is reported {_actions(count)} but is not in the result")
        gone = count[REMOVED] + count[FOLDED]
        if has != had - gone + count[ADDED]:
            broken.append(f"node '{label}': {had} before, {has} after, but {_actions(count)} reported")
        if had <= 1 and has <= 1 and sum(count.values()) > 1:
            broken.append(f"node '{label}' has {sum(count.values())} changes ({_actions(count)}), not one")
    read_past = _read_past(old, acted)
    for label in old.keys() | new.keys():
        if label in acted:
            continue
        was, now = old.get(label, []), new.get(label, [])
        if len(was) != len(now):
            broken.append(f"node '{label}': {len(was)} before, {len(now)} after, and no change reported")
        elif any(not _same_but_read_past(a, b, read_past) for a, b in zip(was, now)):
            broken.append(f"node '{label}' differs after the pass and no change is reported")
    return broken


def _validity_broken(before: onnx.ModelProto, after: onnx.ModelProto, beside: Mapping[str, ConstTensor] | None,
                     constants: Mapping[str, ConstTensor] | None) -> list[str]:
    """onnx.checker on the result, if it passed on the model given (both small), each completed
    the same way (`_completed`)."""
    if before.ByteSize() > CHECKER_MAX_BYTES or after.ByteSize() > CHECKER_MAX_BYTES:
        return []
    if _checker_error(_completed(before, beside)) is not None:
        return []
    error = _checker_error(_completed(after, constants if constants is not None else beside))
    return [] if error is None else [f"the result fails onnx.checker: {error}"]


def _completed(model: onnx.ModelProto, weights: Mapping[str, ConstTensor] | None) -> onnx.ModelProto:
    """A copy of `model` as the writer completes a pass's graph: `weights` as initializers, weight
    headers (name, type, dims: a weight-free graph) filled with zeros, and main graph outputs
    without a complete type typed by shape inference (prune may output an intermediate tensor)."""
    whole = onnx.ModelProto()
    whole.CopyFrom(model)
    have = {t.name for t in whole.graph.initializer}
    whole.graph.initializer.extend(numpy_helper.from_array(c.values(), name) for name, c in (weights or {}).items()
                                   if name not in have)
    _fill_headers(whole.graph)
    untyped = [vi for vi in whole.graph.output if not _complete(vi.type)]
    if untyped:
        inferred = onnx.shape_inference.infer_shapes(whole)
        found = {vi.name: vi for vi in [*inferred.graph.value_info, *inferred.graph.output]}
        for vi in untyped:
            if vi.name in found:
                vi.type.CopyFrom(found[vi.name].type)
    return whole


def _complete(vtype: onnx.TypeProto) -> bool:
    """Whether an output's type is what onnx.checker asks of a main graph's (tensors: type and rank)."""
    kind = vtype.WhichOneof("value")
    if kind == "tensor_type":
        return bool(vtype.tensor_type.elem_type) and vtype.tensor_type.HasField("shape")
    return kind is not None


def _fill_headers(graph: onnx.GraphProto) -> None:
    """Initializers and Constant values of `graph` and its bodies holding no data get zeros."""
    tensors = list(graph.initializer)
    for node in graph.node:
        tensors += [a.t for a in node.attribute if a.type == onnx.AttributeProto.TENSOR]
        for _, body in bodies(node):
            _fill_headers(body)
    for t in tensors:
        if t.data_location != onnx.TensorProto.EXTERNAL and not beyond_header(t, HEADER_FIELDS | {"doc_string"}):
            zeros = np.zeros([int(d) for d in t.dims], np_dtype_for(t.data_type))
            t.CopyFrom(numpy_helper.from_array(zeros, t.name))


def _checker_error(model: onnx.ModelProto) -> str | None:
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, ValueError) as exc:
        return str(exc).strip().splitlines()[0]
    return None


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of `graph` and of its bodies, depth first."""
    for node in graph.node:
        yield node
        for _, body in bodies(node):
            yield from _nodes(body)


def _by_label(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    found: dict[str, list[onnx.NodeProto]] = {}
    for node in _nodes(graph):
        found.setdefault(node_label(node), []).append(node)
    return found


def _read_past(old: dict[str, list[onnx.NodeProto]], acted: dict[str, Counter]) -> dict[str, set[str]]:
    """For each output of a REMOVED node: the names a consumer may read instead (what the removed
    node read, and through chains of removed nodes what those read)."""
    step: dict[str, set[str]] = {}
    for label, count in acted.items():
        if count[REMOVED]:
            for node in old.get(label, ()):
                for out in node.output:
                    if out:
                        step.setdefault(out, set()).update(i for i in node.input if i)
    reach: dict[str, set[str]] = {}
    for out in step:
        seen, todo = set(), list(step[out])
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(step.get(name, ()))
        reach[out] = seen
    return reach


def _same_but_read_past(a: onnx.NodeProto, b: onnx.NodeProto, read_past: dict[str, set[str]]) -> bool:
    """Whether `b` is `a` (bodies aside: their nodes are compared on their own), but for inputs
    renamed past REMOVED nodes."""
    a, b = _shallow(a), _shallow(b)
    if a == b:
        return True
    if len(a.input) != len(b.input):
        return False
    if any(x != y and y not in read_past.get(x, ()) for x, y in zip(a.input, b.input)):
        return False
    del b.input[:]
    b.input.extend(a.input)
    return a == b


def _shallow(node: onnx.NodeProto) -> onnx.NodeProto:
    """A copy of `node` with its bodies emptied."""
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    for attr in copy.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            attr.g.Clear()
        elif attr.type == onnx.AttributeProto.GRAPHS:
            del attr.graphs[:]
    return copy


def _actions(count: Counter) -> str:
    return ", ".join(f"{action} x{n}" if n > 1 else action for action, n in count.items())


def _name(run: Callable) -> str:
    return getattr(run, "__name__", type(run).__name__)
