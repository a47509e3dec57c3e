"""The quantize package's graph rewrites as passes whose contract is checked on every call.

Why: a rewrite that reports a change it did not make (or misses one it made), works on a copy, or
leaves an invalid graph fails later, in ORT's quantizer, with a traceback about something else.
Contract: `@checked` wraps `rewrite(model, ...) -> PassResult` (core/graph/passes.py) and, as
onnx-ir's `PassBase.__call__` does, checks each call: the result is a `PassResult` on the model
given (edited in place); `changed` is True exactly when the model's bytes differ (`fingerprint`:
CRC-32 of the graph's deterministic serialization and of every weight's bytes, before and after);
a changed model passes onnx.checker if the model given did (on its skeleton: weights as typed
graph inputs, no weight bytes copied). A broken contract raises `PassContractError`: a bug.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable

import onnx
from onnx import helper

from onnxport.core.graph.passes import PassResult
from onnxport.core.io.model_io import copy_without_initializers
from onnxport.core.util.text import first_line


class PassContractError(RuntimeError):
    """A quantize rewrite broke the pass contract (see the module docstring)."""


def fingerprint(model: onnx.ModelProto) -> int:
    """CRC-32 of everything in `model`: the graph without its weights, serialized deterministically,
    then each weight's name, type, dims and bytes."""
    crc = zlib.crc32(copy_without_initializers(model).SerializeToString(deterministic=True))
    for t in model.graph.initializer:
        raw = t.raw_data
        if raw:  # the header, then the bytes (not copied again)
            crc = zlib.crc32(raw, zlib.crc32(f"{t.name}|{t.data_type}|{list(t.dims)}".encode(), crc))
        else:
            crc = zlib.crc32(t.SerializeToString(deterministic=True), crc)
    return crc


def skeleton_problem(model: onnx.ModelProto) -> str | None:
    """What onnx.checker says of `model` with its weights replaced by graph inputs of their type and
    shape (None: valid)."""
    skeleton = copy_without_initializers(model)
    inputs = {i.name for i in skeleton.graph.input}
    skeleton.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                                for t in model.graph.initializer if t.name not in inputs)
    try:
        onnx.checker.check_model(skeleton)
    except (onnx.checker.ValidationError, ValueError) as exc:
        return first_line(exc, 300)
    return None


def checked(rewrite: Callable[..., PassResult]) -> Callable[..., PassResult]:
    """See the module docstring."""

    @functools.wraps(rewrite)
    def run(model: onnx.ModelProto, *args, **kwargs) -> PassResult:
        before, valid = fingerprint(model), skeleton_problem(model) is None
        result = rewrite(model, *args, **kwargs)
        name = rewrite.__name__
        if not isinstance(result, PassResult):
            raise PassContractError(f"{name} returned {type(result).__name__}, not a PassResult")
        if result.model is not model:
            raise PassContractError(f"{name} did not edit the model it was given in place")
        differs = fingerprint(model) != before
        if result.changed != differs:
            raise PassContractError(f"{name} reported changed={result.changed}, but the model "
                                    f"{'differs' if differs else 'is the same'}")
        if differs and valid and (problem := skeleton_problem(model)) is not None:
            raise PassContractError(f"{name} left an invalid model: {problem}")
        return result

    return run
