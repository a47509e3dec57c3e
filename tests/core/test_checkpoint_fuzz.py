"""Fuzz the checkpoint readers: random, truncated and mutated bytes give OnnxportError or a result.

Never another exception type, never a crash: every offset in the flatbuffer is bounds-checked.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onnxport.core.checkpoint import read_checkpoint
from onnxport.core.checkpoint_writer import write_checkpoint
from onnxport.core.errors import OnnxportError
from onnxport.core.writer import varint

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def valid_bytes(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("fuzz") / "checkpoint"
    arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(3, np.float32),
              "n": np.array([1, 2], np.int64)}
    write_checkpoint(path, arrays, frozen={"b"}, properties={"k": 1, "s": "v"},
                     optimizer={"g": {"step": 1, "learning_rate": 0.1,
                                      "states": {"w": {"momentum0": np.zeros((3, 4), np.float32)}}}})
    return path.read_bytes()


def _read_all(path) -> None:
    """Open and touch everything a reader exposes, as export/inspect would."""
    params = read_checkpoint(path)
    for tensor in params.values():
        arr = tensor.array()
        if arr.dtype != object:
            arr.sum()
    for group in params.optimizer_groups:
        for moments in group.states.values():
            for tensor in moments.values():
                tensor.array()


def _check(tmp_path, data: bytes) -> None:
    path = tmp_path / "ckpt"
    path.write_bytes(data)
    try:
        _read_all(path)
    except OnnxportError:
        pass


@FUZZ
@given(data=st.binary(max_size=512))
def test_random_bytes(tmp_path, data):
    _check(tmp_path, data)


@FUZZ
@given(data=st.binary(max_size=200))
def test_random_bytes_with_identifier(tmp_path, data):
    _check(tmp_path, data[:4] + b"ODTC" + data[4:])


@FUZZ
@given(cut=st.integers(min_value=0, max_value=10_000))
def test_truncated(tmp_path, valid_bytes, cut):
    _check(tmp_path, valid_bytes[: cut % len(valid_bytes)])


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)),
                      min_size=1, max_size=8))
def test_mutated(tmp_path, valid_bytes, edits):
    data = bytearray(valid_bytes)
    for pos, value in edits:
        data[pos % len(data)] = value
    _check(tmp_path, bytes(data))


@FUZZ
@given(payload=st.binary(max_size=300), count=st.integers(min_value=0, max_value=2**32))
def test_legacy_folder_garbage(tmp_path, payload, count):
    folder = tmp_path / "legacy"
    folder.mkdir(exist_ok=True)
    (folder / "paramtrain_tensors.pbseq").write_bytes(varint(count) + payload)
    try:
        read_checkpoint(folder)
    except OnnxportError:
        pass
