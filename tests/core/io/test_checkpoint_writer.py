"""write_checkpoint: read back by our reader (no ORT needed), loaded by ORT's CheckpointState
(training), conversions from read checkpoints, and atomicity."""

from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto

from onnxport.core.io.checkpoint import read_checkpoint
from onnxport.core.io.kinds import SourceKind, sniff
from onnxport.core.io.parameter_set import ParamTensor
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken
from tests.support import checkpoint_stream, checkpoint_writer
from tests.support.checkpoint_writer import write_checkpoint

OPTIMIZER = {"group0": {"step": 7, "learning_rate": 0.01, "states": {
    "enc.weight": {"momentum0": np.ones((6, 5), np.float32), "momentum1": np.full((6, 5), 2, np.float32)}}}}
PROPERTIES = {"epoch": 3, "loss": 0.25, "note": "hi", "flag": True, "np_int": np.int64(-5), "np_float": np.float32(1.5)}


def mixed_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "enc.weight": rng.standard_normal((6, 5)).astype(np.float32),
        "enc.bias": rng.standard_normal(6).astype(np.float32),
        "transposed": rng.standard_normal((5, 7)).astype(np.float32).T,  # not C-contiguous
        "big_endian": np.arange(20, dtype=">f8"),
        "counts": np.arange(40, dtype=np.int64),
        "half": rng.standard_normal(50).astype(np.float16),
        "mask": np.array([True, False, True]),
        "bytes": np.arange(100, dtype=np.uint8),
        "scale": np.array(2.5, dtype=np.float64),  # 0-d
        "empty": np.zeros((0, 4), np.float32),
        "labels": np.array([["cat", "dog"], ["ému", ""]], dtype=object),
    }


def _span_bytes(tensor) -> bytes:
    span = tensor.file_span()
    with open(span.path, "rb") as f:
        f.seek(span.offset)
        return f.read(span.length)


@pytest.mark.parametrize("external", [False, True, None], ids=["inline", "external", "auto"])
def test_round_trip(tmp_path, external):
    arrays = mixed_arrays()
    path = tmp_path / "checkpoint"
    assert write_checkpoint(path, arrays, frozen={"enc.bias", "labels"}, external_data=external,
                            optimizer=OPTIMIZER, properties=PROPERTIES) == path
    assert sniff(path) is SourceKind.ORT_CHECKPOINT
    assert (tmp_path / "checkpoint.data").exists() is bool(external)
    params = read_checkpoint(path)
    assert params.version == 2 and not params.nominal and sorted(params) == sorted(arrays)
    for name, value in arrays.items():
        got = params[name].array()
        assert got.shape == value.shape, name
        if value.dtype == object:
            assert got.tolist() == value.tolist() and params[name].elem_type == TensorProto.STRING
            continue
        assert got.dtype == value.dtype.newbyteorder("<"), name
        np.testing.assert_array_equal(got, value, err_msg=name)
        span = params[name].file_span()
        assert _span_bytes(params[name]) == np.ascontiguousarray(value, value.dtype.newbyteorder("<")).tobytes()
        on_the_side = bool(external) and value.nbytes >= 64  # like ORT, small tensors stay inline
        assert span.path.name == ("checkpoint.data" if on_the_side else "checkpoint"), name
        assert span.offset % (8 if value.itemsize == 8 else 4 if on_the_side else 16) == 0, name
    assert params.frozen == ["enc.bias", "labels"]
    assert params.properties == {**PROPERTIES, "flag": 1, "np_int": -5, "np_float": 1.5}
    (group,) = params.optimizer_groups
    assert (group.name, group.step) == ("group0", 7) and group.initial_learning_rate == pytest.approx(0.01)
    np.testing.assert_array_equal(group.states["enc.weight"]["momentum1"].array(), np.full((6, 5), 2, np.float32))


def test_trainable_argument_and_order(tmp_path):
    arrays = {"b": np.ones(2, np.float32), "a": np.zeros(3, np.int32), "c": np.ones(1, np.float64)}
    write_checkpoint(tmp_path / "ckpt", arrays, trainable=["a"])
    params = read_checkpoint(tmp_path / "ckpt")
    assert params.trainable == ["a"] and params.frozen == ["b", "c"]


def test_nominal(tmp_path):
    write_checkpoint(tmp_path / "nominal", mixed_arrays(), frozen={"mask"}, nominal=True, external_data=True)
    assert not (tmp_path / "nominal.data").exists()
    params = read_checkpoint(tmp_path / "nominal")
    assert params.nominal and sorted(params) == sorted(mixed_arrays()) and params.frozen == ["mask"]
    assert all(t.shape == () for t in params.values())  # ORT's nominal tensors have dims []
    assert params["half"].elem_type == TensorProto.FLOAT16


@pytest.mark.parametrize("kernel_copy", [True, False], ids=["copy_file_range", "buffered"])
@pytest.mark.parametrize("external", [False, True], ids=["inline", "external"])
def test_rewriting_a_read_checkpoint_copies_its_bytes(tmp_path, monkeypatch, external, kernel_copy):
    if not kernel_copy:  # what runs where the OS has no copy_file_range
        monkeypatch.setattr(checkpoint_stream, "_COPY_FILE_RANGE", None)
    arrays = mixed_arrays()
    write_checkpoint(tmp_path / "first", arrays, frozen={"mask"}, external_data=not external,
                     optimizer=OPTIMIZER, properties={"epoch": 1})
    first = read_checkpoint(tmp_path / "first")
    assert first["enc.weight"].file_span() is not None  # so its bytes are copied file to file
    write_checkpoint(tmp_path / "second", first, frozen=first.frozen, external_data=external,
                     optimizer=first.optimizer_groups, properties=first.properties)
    second = read_checkpoint(tmp_path / "second")
    assert list(second) == list(first) and second.frozen == ["mask"] and second.properties == {"epoch": 1}
    for name in arrays:
        assert second[name].array().tolist() == first[name].array().tolist(), name
    moment = second.optimizer_groups[0].states["enc.weight"]["momentum0"]
    np.testing.assert_array_equal(moment.array(), np.ones((6, 5), np.float32))


def test_rewriting_a_checkpoint_in_place(tmp_path):
    path, arrays = tmp_path / "ckpt", {"w": np.arange(100, dtype=np.float32), "b": np.ones(3, np.int64)}
    write_checkpoint(path, arrays, external_data=True)
    for external in (True, False, True):  # sources are the very files being replaced
        params = read_checkpoint(path)
        write_checkpoint(path, params, external_data=external)
        for name, value in arrays.items():
            np.testing.assert_array_equal(read_checkpoint(path)[name].array(), value)
            np.testing.assert_array_equal(params[name].array(), value)  # the old mapping still reads


def test_bfloat16_kept_through_param_tensors(tmp_path):
    bits = np.array([0x3F80, 0xC000, 0x0000], dtype=np.uint16)  # 1.0, -2.0, 0.0 in bfloat16
    write_checkpoint(tmp_path / "ckpt", {"bf": ParamTensor("bf", TensorProto.BFLOAT16, (3,), lambda: bits)})
    params = read_checkpoint(tmp_path / "ckpt")
    assert params["bf"].elem_type == TensorProto.BFLOAT16
    np.testing.assert_array_equal(params["bf"].array(), bits)


def test_auto_external_and_size_limit(tmp_path, monkeypatch):
    arrays = {"w": np.ones((64, 64), np.float32)}
    monkeypatch.setattr(checkpoint_writer, "AUTO_EXTERNAL_BYTES", 1000)
    write_checkpoint(tmp_path / "auto", arrays)
    assert read_checkpoint(tmp_path / "auto")["w"].file_span().path.name == "auto.data"
    monkeypatch.setattr(checkpoint_writer, "INLINE_LIMIT", 4000)
    with pytest.raises(OnnxportError, match="over the 2 GiB limit.*external data"):
        write_checkpoint(tmp_path / "inline", arrays, external_data=False)
    assert not (tmp_path / "inline").exists()


@pytest.mark.parametrize("kwargs, message", [
    ({"frozen": {"nope"}}, "'nope' is not one of the parameters"),
    ({"trainable": ["w"], "frozen": ["w"]}, "'w' is both trainable and frozen"),
    ({"properties": {"when": object()}}, "property 'when': object values cannot be stored"),
    ({"properties": {"big": 2**70}}, "property 'big' must be an int64"),
    ({"optimizer": {"g": {"step": 1.5}}}, "step must be an int64"),
])
def test_bad_arguments(tmp_path, kwargs, message):
    with pytest.raises(OnnxportError, match=message):
        write_checkpoint(tmp_path / "ckpt", {"w": np.ones(2, np.float32)}, **kwargs)
    assert os.listdir(tmp_path) == []


def test_bad_values_and_destinations(tmp_path):
    with pytest.raises(OnnxportError, match="'t': numpy dtype datetime64"):
        write_checkpoint(tmp_path / "ckpt", {"t": np.array(["2020-01-01"], dtype="datetime64[D]")})
    with pytest.raises(OnnxportError, match="string tensors hold str or bytes"):
        write_checkpoint(tmp_path / "ckpt", {"s": np.array([1, "a"], dtype=object)})
    with pytest.raises(OnnxportError, match="folder .* does not exist"):
        write_checkpoint(tmp_path / "missing" / "ckpt", {"w": np.ones(2)})
    with pytest.raises(OnnxportError, match="is a folder"):
        write_checkpoint(tmp_path, {"w": np.ones(2)})


def test_failure_leaves_an_existing_checkpoint_untouched(tmp_path):
    path = tmp_path / "checkpoint"
    write_checkpoint(path, {"w": np.ones((32, 32), np.float32)}, external_data=True)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def broken() -> np.ndarray:
        raise OnnxportError("source went away")

    values = {"a": np.zeros((64, 64), np.float32), "b": ParamTensor("b", TensorProto.FLOAT, (4,), broken)}
    for external in (False, True):
        with pytest.raises(OnnxportError, match="source went away"):
            write_checkpoint(path, values, external_data=external)
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temp files either

    token, seen = CancelToken(), []

    def progress(fraction, message):
        seen.append(fraction)
        token.cancel()

    with pytest.raises(Cancelled):
        write_checkpoint(path, {"a": np.zeros((64, 64), np.float32), "b": np.ones(64, np.float32)},
                         progress=progress, cancel=token)
    assert seen and {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_progress_reaches_one(tmp_path):
    seen = []
    write_checkpoint(tmp_path / "ckpt", {"a": np.zeros(1000, np.float32), "b": np.ones(10, np.int8)},
                     progress=lambda f, m: seen.append(f))
    assert seen == sorted(seen) and seen[-1] == 1.0


# ---- ONNX Runtime loads what we write ------------------------------------------------------------

ORT_TYPES = [np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
             np.uint64, np.bool_]  # ORT 1.19's checkpoint loader rejects float16, bfloat16, strings


@pytest.mark.training
@pytest.mark.parametrize("external", [False, True], ids=["inline", "external"])
def test_ort_loads_what_we_write(tmp_path, external):
    helpers = pytest.importorskip("tests.core.ort_training_helpers")
    rng = np.random.default_rng(0)
    arrays = {f"t.{np.dtype(t).name}": (rng.standard_normal((5, 7)) * 50).astype(t) for t in ORT_TYPES}
    arrays.update({"scalar": np.array(1.5, np.float32), "empty": np.zeros((0, 3), np.float32),
                   "tiny": np.arange(3, dtype=np.float32)})
    path = tmp_path / "checkpoint"
    write_checkpoint(path, arrays, frozen={"t.int8", "tiny"}, external_data=external,
                     properties={"tag": "x", "n": 2, "f": 0.5})
    theirs = helpers.ort_parameters(path)
    assert sorted(theirs) == sorted(arrays)
    for name, value in arrays.items():
        got, requires_grad = theirs[name]
        assert got.dtype == value.dtype and got.shape == value.shape and got.tobytes() == value.tobytes(), name
        assert requires_grad is (name not in {"t.int8", "tiny"})
    props = helpers.ort_checkpoint(path).properties
    assert (props["tag"], props["n"], props["f"]) == ("x", 2, 0.5)


@pytest.mark.training
def test_ort_loads_our_nominal_checkpoint(tmp_path):
    helpers = pytest.importorskip("tests.core.ort_training_helpers")
    write_checkpoint(tmp_path / "nominal", {"w": np.ones((2, 3), np.float32), "b": np.ones(2)}, frozen={"b"},
                     nominal=True)
    state = helpers.ort_checkpoint(tmp_path / "nominal")
    assert "w" in state.requires_grad and "b" in state.requires_grad
    assert "nominal state" in state.values_refused and not state.values


@pytest.mark.training
def test_ort_resumes_training_from_our_rewrite(tmp_path):
    """Parameters and AdamW state rewritten by us make ORT's next step bit-identical to its own."""
    helpers = pytest.importorskip("tests.core.ort_training_helpers")
    spec = helpers.mlp_with_frozen()
    arts = helpers.make_trained_artifacts(tmp_path / "a", spec, steps=3, properties={"epoch": 2})
    ours = read_checkpoint(arts.checkpoint)
    write_checkpoint(tmp_path / "rewritten", ours, frozen=ours.frozen, optimizer=ours.optimizer_groups,
                     properties=ours.properties, external_data=True)
    write_checkpoint(tmp_path / "no_optimizer_state", ours, frozen=ours.frozen)

    def one_step(checkpoint) -> dict[str, np.ndarray]:
        after = tmp_path / f"{checkpoint.name}.after"
        helpers.train_steps(helpers.training_process(), arts.files, checkpoint,
                            [[spec.inputs["input"], np.array([0, 1, 2, 3], np.int64)]], after)
        return {n: values for n, (values, _) in helpers.ort_parameters(after).items()}

    reference, resumed = one_step(arts.checkpoint), one_step(tmp_path / "rewritten")
    assert all(reference[n].tobytes() == resumed[n].tobytes() for n in reference)
    fresh = one_step(tmp_path / "no_optimizer_state")
    assert any(reference[n].tobytes() != fresh[n].tobytes() for n in spec.trainable)  # the state mattered
