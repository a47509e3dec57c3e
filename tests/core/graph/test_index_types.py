"""An index built without waiting for shape inference (the app shows the tree first) is, once
`fill_types` ran, the index `build_index` returns when it waits; a cancel stops the child."""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.graph import index as index_module
from onnxport.core.graph.index import build_index
from onnxport.core.graph.index_types import fill_types
from onnxport.core.util.errors import Cancelled
from onnxport.core.util.progress import CancelToken

from ..model_builders import eval_like_mlp


def summary(index) -> dict:
    return {n: (t.kind, t.dtype, t.shape, t.producer, t.scope, t.training_only) for n, t in index.tensors.items()}


@pytest.fixture
def big_enough(tmp_path, monkeypatch):
    """A small eval graph treated as big (shape inference in a child)."""
    monkeypatch.setattr(index_module, "OUT_OF_PROCESS_NODES", 1)
    path = tmp_path / "eval_model.onnx"
    onnx.save(eval_like_mlp(), path)
    return path


def test_filled_types_are_the_waited_ones(big_enough):
    waited = build_index(onnx.load(big_enough), big_enough)
    assert waited.pending_types is None and waited["hidden"].shape is not None
    early = build_index(onnx.load(big_enough), big_enough, wait_types=False)
    assert early.pending_types is not None
    assert early["hidden"].dtype is None and early["hidden"].shape is None  # not inferred yet
    assert early["input"].shape == waited["input"].shape  # declared types are there at once
    hidden = early["hidden"]
    assert fill_types(early) > 0
    assert early["hidden"] is hidden  # the same objects, filled in place
    assert summary(early) == summary(waited) and early.pending_types is None
    assert fill_types(early) == 0  # nothing pending any more


def test_without_a_child_the_index_waits(big_enough):
    in_memory = build_index(onnx.load(big_enough), None, wait_types=False)  # no file: inferred here
    assert in_memory.pending_types is None and in_memory["hidden"].shape is not None


def test_a_cancelled_fill_stops_the_child(big_enough):
    early = build_index(onnx.load(big_enough), big_enough, wait_types=False)
    inference = early.pending_types.inference
    cancel = CancelToken()
    cancel.cancel()
    with pytest.raises(Cancelled):
        fill_types(early, cancel)
    assert inference._proc is None and early.pending_types is None  # killed and forgotten
    assert early["hidden"].shape is None


def test_a_failed_child_falls_back_to_inference_here(big_enough, monkeypatch):
    from onnxport.core.graph import shape_types

    waited = build_index(onnx.load(big_enough), big_enough)
    monkeypatch.setattr(shape_types, "TARGET", "tests.core.util.child_functions:exit_3")
    early = build_index(onnx.load(big_enough), big_enough, wait_types=False)
    assert fill_types(early) > 0 and summary(early) == summary(waited)


def test_an_untyped_index_infers_nothing(big_enough, monkeypatch):
    """`typed=False` (the CLI's export review): no child, no inference here, the rest as usual."""
    waited = build_index(onnx.load(big_enough), big_enough)

    def no_inference(*args, **kwargs):
        raise AssertionError("shape inference started")

    monkeypatch.setattr(index_module.TypeInference, "start", no_inference)
    monkeypatch.setattr(index_module, "infer_value_info", no_inference)
    untyped = build_index(onnx.load(big_enough), big_enough, typed=False)
    assert untyped.pending_types is None and untyped["hidden"].shape is None
    assert untyped["input"].shape == waited["input"].shape  # declared types are there
    assert {n: t.kind for n, t in untyped.tensors.items()} == {n: t.kind for n, t in waited.tensors.items()}
