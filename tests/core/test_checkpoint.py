"""Checkpoint reading: our writer round-trips (no ORT needed), the legacy .pbseq folder, errors."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from onnxport.core.checkpoint import read_checkpoint
from onnxport.core.checkpoint_writer import write_checkpoint
from onnxport.core.errors import CorruptFileError, NominalCheckpointError, OnnxportError
from onnxport.core.sources import SourceKind, read_parameters, sniff
from onnxport.core.writer import varint


@pytest.fixture
def arrays():
    rng = np.random.default_rng(0)
    return {
        "enc.weight": rng.standard_normal((6, 5)).astype(np.float32),
        "enc.bias": rng.standard_normal(6).astype(np.float32),
        "counts": np.arange(4, dtype=np.int64),
        "scale": np.array(2.5, dtype=np.float64),
    }


@pytest.mark.parametrize("external", [False, True], ids=["inline", "external-data"])
def test_round_trip_values_split_optimizer_and_properties(tmp_path, arrays, external):
    path = tmp_path / "checkpoint"
    optimizer = {"group0": {"step": 7, "learning_rate": 0.01, "states": {
        "enc.weight": {"momentum0": np.ones((6, 5), np.float32), "momentum1": np.full((6, 5), 2, np.float32)}}}}
    write_checkpoint(path, arrays, frozen={"enc.bias"}, external_data=external, optimizer=optimizer,
                     properties={"epoch": 3, "loss": 0.25, "note": "hi"})
    assert sniff(path) is SourceKind.ORT_CHECKPOINT
    params = read_checkpoint(path)
    assert params.version == 2 and not params.nominal and params.kind == "ort-checkpoint"
    for name, value in arrays.items():
        got = params[name].array()
        assert got.dtype == value.dtype and got.shape == value.shape
        np.testing.assert_array_equal(got, value)
    assert params.frozen == ["enc.bias"] and set(params.trainable) == {"enc.weight", "counts", "scale"}
    assert params.properties == {"epoch": 3, "loss": 0.25, "note": "hi"}
    (group,) = params.optimizer_groups
    assert (group.name, group.step) == ("group0", 7) and group.initial_learning_rate == pytest.approx(0.01)
    np.testing.assert_array_equal(group.states["enc.weight"]["momentum1"].array(), np.full((6, 5), 2, np.float32))
    # zero-copy: spans point at the exact bytes in the file
    span = params["enc.weight"].file_span()
    raw = span.path.read_bytes()[span.offset: span.offset + span.length]
    assert raw == arrays["enc.weight"].tobytes()
    assert span.path.name == ("checkpoint.data" if external else "checkpoint")


def test_nominal_checkpoint_is_detected(tmp_path, arrays):
    path = tmp_path / "nominal_checkpoint"
    write_checkpoint(path, arrays, nominal=True)
    params = read_checkpoint(path)
    assert params.nominal and sorted(params) == sorted(arrays)
    with pytest.raises(NominalCheckpointError):
        params["enc.weight"].array()


def test_missing_data_file_and_truncation_are_clear(tmp_path, arrays):
    path = tmp_path / "ckpt"
    write_checkpoint(path, arrays, external_data=True)
    (tmp_path / "ckpt.data").unlink()
    with pytest.raises(CorruptFileError, match=r"ckpt\.data is missing"):
        read_checkpoint(path)
    write_checkpoint(path, arrays)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptFileError, match="ckpt"):
        read_checkpoint(path)
    path.write_bytes(b"")
    with pytest.raises(CorruptFileError, match="empty"):
        read_checkpoint(path)
    path.write_bytes(b"\0\0\0\0NOPE" + bytes(40))
    with pytest.raises(CorruptFileError, match="ODTC"):
        read_checkpoint(path)


def _write_pbseq(path, tensors: list[onnx.TensorProto]) -> None:
    body = bytearray(varint(len(tensors)))
    for t in tensors:
        data = t.SerializeToString()
        body += varint(len(data)) + data
    path.write_bytes(bytes(body))


def test_legacy_pbseq_folder(tmp_path, arrays):
    folder = tmp_path / "old_checkpoint"
    folder.mkdir()
    train = [onnx.numpy_helper.from_array(arrays["enc.weight"], "enc.weight")]
    frozen = [onnx.numpy_helper.from_array(arrays["enc.bias"], "enc.bias"),
              onnx.helper.make_tensor("few", onnx.TensorProto.FLOAT, [2], [1.5, -2.0])]  # typed field, no raw
    _write_pbseq(folder / "paramtrain_tensors.pbseq", train)
    _write_pbseq(folder / "paramfrozen_tensors.pbseq", frozen)
    assert sniff(folder) is SourceKind.ORT_CHECKPOINT_LEGACY
    params = read_parameters(folder)
    assert params.kind == "ort-checkpoint-legacy"
    np.testing.assert_array_equal(params["enc.weight"].array(), arrays["enc.weight"])
    np.testing.assert_array_equal(params["few"].array(), np.array([1.5, -2.0], np.float32))
    assert params["enc.weight"].trainable and params["enc.bias"].trainable is False
    assert params["enc.weight"].file_span() is not None
    (folder / "paramtrain_tensors.pbseq").write_bytes(b"\x05\x80")
    with pytest.raises(CorruptFileError):
        read_parameters(folder)


def test_empty_folder_is_not_a_checkpoint(tmp_path):
    with pytest.raises(OnnxportError):
        read_checkpoint(tmp_path)


def test_tensors_are_views_of_the_mapped_file(tmp_path):
    write_checkpoint(tmp_path / "big", {f"w{i}": np.full((256, 256), i, np.float32) for i in range(4)})
    params = read_checkpoint(tmp_path / "big")
    arr = params["w3"].array()
    assert not arr.flags.owndata and not arr.flags.writeable  # a read-only view of the mmap, no copy
    assert arr[5, 7] == 3
