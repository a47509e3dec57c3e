"""Fuzz the checkpoint readers: random, truncated and mutated bytes end in OnnxportError or a
valid result, never another exception type and never a crash (every flatbuffer offset is
bounds-checked; the memory-mapped loaders refuse files that shrank instead of dying of SIGBUS)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from onnxport.core.export.wire_format import varint
from onnxport.core.io import checkpoint
from onnxport.core.io.checkpoint import read_checkpoint
from onnxport.core.util.errors import OnnxportError
from tests.support.checkpoint_writer import write_checkpoint

from ..fuzz_seeds import ARRAYS, fuzz_settings, pbseq

FUZZ = fuzz_settings(300)  # see fuzz_seeds: bounded and derandomized, or ONNXPORT_FUZZ_EXAMPLES random ones
EDITS = st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), min_size=1,
                 max_size=8)


@pytest.fixture(autouse=True)
def no_safety_net(monkeypatch):
    """Let a missed bounds check surface as what it is instead of a CorruptFileError."""
    monkeypatch.setattr(checkpoint, "SAFETY_NET", ())


def _write_valid(folder, external: bool) -> None:
    write_checkpoint(folder / "ckpt", ARRAYS, frozen={"b"}, external_data=external,
                     properties={"k": 1, "f": 0.5, "s": "v"},
                     optimizer={"g": {"step": 1, "learning_rate": 0.1,
                                      "states": {"w": {"momentum0": np.zeros((3, 4), np.float32)}}}})


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("fuzz")
    _write_valid(folder, external=False)
    inline = (folder / "ckpt").read_bytes()
    _write_valid(folder, external=True)
    return {"inline": inline, "external": (folder / "ckpt").read_bytes(), "data": (folder / "ckpt.data").read_bytes()}


def _touch_all(path) -> None:
    """Open and touch everything a reader exposes, as inspect/export would."""
    params = read_checkpoint(path)
    tensors = list(params.values())
    tensors += [t for g in params.optimizer_groups for moments in g.states.values() for t in moments.values()]
    for tensor in tensors:
        values = tensor.array()
        if values.dtype != object:
            values.sum()
        _ = (tensor.shape, tensor.nbytes, tensor.file_span())
    _ = dict(params.properties)


def _check(path, data: bytes, sidecar: bytes | None = None) -> None:
    path.write_bytes(data)
    if sidecar is not None:
        path.with_name(path.name + ".data").write_bytes(sidecar)
    try:
        _touch_all(path)
    except OnnxportError:
        pass


def _mutate(data: bytes, edits) -> bytes:
    out = bytearray(data)
    for pos, value in edits:
        out[pos % len(out)] = value
    return bytes(out)


@FUZZ
@given(data=st.binary(max_size=512))
def test_random_bytes(tmp_path, data):
    _check(tmp_path / "ckpt", data)


@FUZZ
@given(data=st.binary(max_size=300))
def test_random_bytes_with_identifier(tmp_path, data):
    _check(tmp_path / "ckpt", data[:4] + b"ODTC" + data[4:])


@FUZZ
@given(cut=st.integers(min_value=0, max_value=100_000), which=st.sampled_from(["inline", "external"]))
def test_truncated(tmp_path, valid, cut, which):
    data = valid[which]
    _check(tmp_path / "ckpt", data[: cut % len(data)], valid["data"])


@FUZZ
@given(edits=EDITS, which=st.sampled_from(["inline", "external"]))
def test_mutated(tmp_path, valid, edits, which):
    _check(tmp_path / "ckpt", _mutate(valid[which], edits), valid["data"])


@FUZZ
@given(edits=EDITS, cut=st.integers(min_value=0, max_value=1000))
def test_mutated_or_short_external_data(tmp_path, valid, edits, cut):
    _check(tmp_path / "ckpt", valid["external"], _mutate(valid["data"], edits)[:cut])


VALID_PBSEQ = pbseq([onnx.numpy_helper.from_array(ARRAYS["w"], "w"), onnx.numpy_helper.from_array(ARRAYS["n"], "n"),
                      onnx.helper.make_tensor("few", onnx.TensorProto.FLOAT, [2], [1.5, -2.0]),
                      onnx.numpy_helper.from_array(np.array([b"x", b"yz"], dtype=object), "s")])


@FUZZ
@given(payload=st.binary(max_size=300), count=st.integers(min_value=0, max_value=2**32),
       edits=EDITS, mutate=st.booleans())
def test_legacy_folder(tmp_path, payload, count, edits, mutate):
    folder = tmp_path / "legacy"
    folder.mkdir(exist_ok=True)
    data = _mutate(VALID_PBSEQ, edits) if mutate else varint(count) + payload
    (folder / "paramtrain_tensors.pbseq").write_bytes(data)
    (folder / "custom_properties.pbseq").write_bytes(data[::-1] if mutate else data)
    try:
        _touch_all(folder)
    except OnnxportError:
        pass


SHRINK = textwrap.dedent("""
    import os, sys
    from onnxport.core.io.checkpoint import read_checkpoint
    from onnxport.core.util.errors import CorruptFileError
    source, victim, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    params = read_checkpoint(source)
    os.truncate(victim, size)  # another program rewrites the file in place
    refused = 0
    for tensor in params.values():
        try:
            tensor.array().sum()
        except CorruptFileError as exc:
            assert "changed on disk" in str(exc), exc
            refused += 1
    print(refused)
""")


@pytest.mark.parametrize("layout", ["inline", "external", "legacy"])
def test_file_shrinking_under_a_reader_does_not_kill_the_process(tmp_path, layout):
    if layout == "legacy":
        (tmp_path / "paramtrain_tensors.pbseq").write_bytes(VALID_PBSEQ)
        source, victim = tmp_path, tmp_path / "paramtrain_tensors.pbseq"
    else:
        write_checkpoint(tmp_path / "ckpt", {"w": np.ones((1024, 1024), np.float32)},
                         external_data=layout == "external")
        source, victim = tmp_path / "ckpt", tmp_path / ("ckpt.data" if layout == "external" else "ckpt")
    run = subprocess.run([sys.executable, "-c", SHRINK, str(source), str(victim), "100"], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, f"reader died (signal {-run.returncode})" if run.returncode < 0 else run.stderr
    assert int(run.stdout) >= 1
