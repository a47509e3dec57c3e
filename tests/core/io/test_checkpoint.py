"""read_checkpoint: against ONNX Runtime's own checkpoints (training), the legacy .pbseq folder,
merging, and clear one-line errors for every kind of bad file."""

from __future__ import annotations

import struct

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from onnxport.core.export.wire_format import varint
from onnxport.core.io.checkpoint import CKPT_VERSION, T_DIMS, read_checkpoint
from onnxport.core.io.flatbuf import FlatBuffer
from onnxport.core.io.kinds import SourceKind, sniff
from onnxport.core.io.parameter_set import merge_parameter_sets
from onnxport.core.io.readers import read_parameters
from onnxport.core.util.errors import (
    CheckpointMismatchError,
    CorruptFileError,
    NominalCheckpointError,
    OnnxportError,
)
from tests.support.checkpoint_writer import write_checkpoint

ORT_MODELS = ["mlp_with_frozen", "small_cnn", "batchnorm_model", "embedding_classifier", "regression_mlp"]


def _helpers():
    return pytest.importorskip("tests.core.ort_training_helpers")


def _span_bytes(tensor) -> bytes:
    span = tensor.file_span()
    with open(span.path, "rb") as f:
        f.seek(span.offset)
        return f.read(span.length)


# ---- ONNX Runtime's checkpoints ---------------------------------------------------------------

@pytest.mark.training
@pytest.mark.parametrize("model", ORT_MODELS)
def test_trained_ort_checkpoint_equals_ort_state(tmp_path, model):
    helpers = _helpers()
    spec = getattr(helpers, model)()
    props = {"epoch": 4, "best_loss": 0.5, "run": "nightly"}
    arts = helpers.make_trained_artifacts(tmp_path / model, spec, steps=4, properties=props)
    assert sniff(arts.checkpoint) is SourceKind.ORT_CHECKPOINT
    params = read_parameters(arts.checkpoint)
    assert (params.kind, params.version, params.nominal) == ("ort-checkpoint", 2, False)

    theirs = helpers.ort_parameters(arts.checkpoint)
    assert sorted(params) == sorted(theirs) == sorted(spec.trainable + spec.frozen)
    for name, (values, requires_grad) in theirs.items():
        ours = params[name].array()
        assert ours.dtype == values.dtype and ours.shape == values.shape, name
        assert ours.tobytes() == values.tobytes(), f"{name} differs from ORT's"
        assert params[name].trainable is requires_grad
        assert _span_bytes(params[name]) == values.tobytes()
        assert not ours.flags.owndata and not ours.flags.writeable  # a view of the mapped file
    assert sorted(params.frozen) == sorted(spec.frozen)
    assert params.properties == props

    (group,) = params.optimizer_groups
    assert (group.name, group.step) == ("group0", 4)
    assert group.initial_learning_rate == pytest.approx(1e-3)  # AdamW's default in generate_artifacts
    assert sorted(group.states) == sorted(spec.trainable)
    for name, moments in group.states.items():
        assert set(moments) == {"momentum0", "momentum1"}
        for moment in moments.values():
            assert moment.shape == params[name].shape and moment.trainable is None
        assert np.any(moments["momentum1"].array() != 0), "four AdamW steps leave no second moment?"


@pytest.mark.training
def test_ort_nominal_checkpoint_is_detected(tmp_path):
    helpers = _helpers()
    spec = helpers.mlp_with_frozen()
    path = helpers.make_nominal_checkpoint(tmp_path, spec)
    params = read_checkpoint(path)
    assert params.nominal and sorted(params) == sorted(spec.trainable + spec.frozen)
    assert sorted(params.frozen) == sorted(spec.frozen)
    assert all(params[n].elem_type == onnx.TensorProto.FLOAT for n in params)
    with pytest.raises(NominalCheckpointError, match="fc1.weight"):
        params["fc1.weight"].array()
    assert not read_checkpoint(tmp_path / "checkpoint").nominal  # ORT writes the full one beside it


@pytest.mark.training
def test_merging_ort_checkpoints(tmp_path):
    helpers = _helpers()
    mlp = helpers.make_trained_artifacts(tmp_path / "mlp", helpers.mlp_two_outputs(), steps=1)
    reg = helpers.make_trained_artifacts(tmp_path / "reg", helpers.regression_mlp(), steps=1)
    merged = merge_parameter_sets([read_checkpoint(mlp.checkpoint), read_checkpoint(reg.checkpoint)])
    expected = {**helpers.ort_parameters(mlp.checkpoint), **helpers.ort_parameters(reg.checkpoint)}
    assert sorted(merged) == sorted(expected)
    for name, (values, _) in expected.items():
        assert merged[name].array().tobytes() == values.tobytes()

    other = helpers.make_trained_artifacts(tmp_path / "mlp2", helpers.mlp_two_outputs(seed=9), steps=1)
    with pytest.raises(CheckpointMismatchError, match="fc1.*different values"):
        merge_parameter_sets([read_checkpoint(mlp.checkpoint), read_checkpoint(other.checkpoint)])
    same = merge_parameter_sets([read_checkpoint(mlp.checkpoint), read_checkpoint(mlp.checkpoint)])
    assert sorted(same) == sorted(helpers.ort_parameters(mlp.checkpoint))


def test_merging_needs_equal_values_for_shared_names(tmp_path):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    write_checkpoint(tmp_path / "a", {"w": w, "a.bias": np.ones(2, np.float32)})
    write_checkpoint(tmp_path / "b", {"w": w, "b.bias": np.zeros(2, np.float32)}, frozen={"w"})
    write_checkpoint(tmp_path / "c", {"w": w + 1})
    merged = merge_parameter_sets([read_checkpoint(tmp_path / "a"), read_checkpoint(tmp_path / "b")])
    assert sorted(merged) == ["a.bias", "b.bias", "w"]
    with pytest.raises(CheckpointMismatchError, match="'w'"):
        merge_parameter_sets([read_checkpoint(tmp_path / "a"), read_checkpoint(tmp_path / "c")])


# ---- the legacy folder ------------------------------------------------------------------------

def write_pbseq(path, tensors: list[onnx.TensorProto]) -> None:
    """ORT's message sequence: varint32 count, then per message varint32 length + bytes."""
    body = bytearray(varint(len(tensors)))
    for t in tensors:
        data = t.SerializeToString()
        body += varint(len(data)) + data
    path.write_bytes(bytes(body))


def _scalar(name: str, value) -> onnx.TensorProto:
    if isinstance(value, str):
        return helper.make_tensor(name, onnx.TensorProto.STRING, [], [value.encode()])
    kind = onnx.TensorProto.INT64 if isinstance(value, int) else onnx.TensorProto.FLOAT
    return helper.make_tensor(name, kind, [], [value])  # typed field, as ORT's ToTensor writes it


def test_legacy_pbseq_folder(tmp_path):
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((64, 32)).astype(np.float32)
    bias, steps = rng.standard_normal(64).astype(np.float32), np.array([3, 1], np.int64)
    folder = tmp_path / "old_checkpoint"
    folder.mkdir()
    write_pbseq(folder / "paramtrain_tensors.pbseq", [numpy_helper.from_array(weight, "enc.weight"),
                                                     numpy_helper.from_array(steps, "steps")])
    write_pbseq(folder / "paramfrozen_tensors.pbseq", [
        numpy_helper.from_array(bias, "enc.bias"),
        helper.make_tensor("few", onnx.TensorProto.FLOAT, [2], [1.5, -2.0]),  # float_data, no raw_data
    ])
    for i in range(2):
        write_pbseq(folder / f"optim_group0_momentum{i}_tensors.pbseq",
                    [numpy_helper.from_array(weight * (i + 2), "enc.weight")])
    write_pbseq(folder / "optim_group0_properties.pbseq",
                [_scalar("builtin.initial_learning_rate", 0.25), _scalar("builtin.step", 7)])
    write_pbseq(folder / "custom_properties.pbseq", [_scalar("epoch", 3), _scalar("loss", 0.5), _scalar("tag", "x")])

    assert sniff(folder) is SourceKind.ORT_CHECKPOINT_LEGACY
    assert sniff(folder / "paramtrain_tensors.pbseq") is SourceKind.ORT_CHECKPOINT_LEGACY
    for params in (read_parameters(folder), read_parameters(folder / "paramtrain_tensors.pbseq")):
        assert params.kind == "ort-checkpoint-legacy" and not params.nominal
        assert sorted(params) == ["enc.bias", "enc.weight", "few", "steps"]
        np.testing.assert_array_equal(params["enc.weight"].array(), weight)
        np.testing.assert_array_equal(params["steps"].array(), steps)
        np.testing.assert_array_equal(params["few"].array(), np.array([1.5, -2.0], np.float32))
        assert params.trainable == ["enc.weight", "steps"] and params.frozen == ["enc.bias", "few"]
        assert _span_bytes(params["enc.weight"]) == weight.tobytes()  # zero-copy, with a span
        assert not params["enc.weight"].array().flags.owndata
        assert params["few"].file_span() is None
        assert params.properties == {"epoch": 3, "loss": 0.5, "tag": "x"}
        (group,) = params.optimizer_groups
        assert (group.name, group.step, group.initial_learning_rate) == ("group0", 7, 0.25)
        np.testing.assert_array_equal(group.states["enc.weight"]["momentum1"].array(), weight * 3)


def test_legacy_folder_errors_name_the_file(tmp_path):
    with pytest.raises(CorruptFileError, match="not a checkpoint folder"):
        read_checkpoint(tmp_path)
    train = tmp_path / "paramtrain_tensors.pbseq"
    train.write_bytes(b"\x05\x80")
    with pytest.raises(CorruptFileError, match="paramtrain_tensors.pbseq"):
        read_checkpoint(tmp_path)
    write_pbseq(train, [numpy_helper.from_array(np.ones(4, np.float32), "w")])
    data = train.read_bytes()
    train.write_bytes(data[:-3])
    with pytest.raises(CorruptFileError, match="truncated"):
        read_checkpoint(tmp_path)
    bad = numpy_helper.from_array(np.ones(4, np.float32), "w")
    bad.dims[:] = [5]
    write_pbseq(train, [bad])
    with pytest.raises(CorruptFileError, match="tensor 'w' has 16 bytes of data, 20 expected"):
        read_checkpoint(tmp_path)
    external = numpy_helper.from_array(np.ones(4, np.float32), "w")
    onnx.external_data_helper.set_external_data(external, "/etc/passwd")
    external.ClearField("raw_data")
    write_pbseq(train, [external])
    with pytest.raises(CorruptFileError, match="external data"):
        read_checkpoint(tmp_path)


# ---- errors for bad flatbuffer files -------------------------------------------------------------

@pytest.fixture
def arrays():
    rng = np.random.default_rng(0)
    return {"w": rng.standard_normal((6, 5)).astype(np.float32), "b": rng.standard_normal(6).astype(np.float32)}


def test_not_a_checkpoint(tmp_path):
    path = tmp_path / "ckpt"
    with pytest.raises(OnnxportError, match="ckpt: no such file"):
        read_checkpoint(path)
    path.write_bytes(b"")
    with pytest.raises(CorruptFileError, match="ckpt: empty file"):
        read_checkpoint(path)
    path.write_bytes(b"\0\0\0\0NOPE" + bytes(40))
    with pytest.raises(CorruptFileError, match="no 'ODTC' identifier"):
        read_checkpoint(path)


def test_truncated_file(tmp_path, arrays):
    path = tmp_path / "ckpt"
    write_checkpoint(path, arrays)
    data = path.read_bytes()
    for cut in (6, 40, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(CorruptFileError, match="ckpt"):
            read_checkpoint(path)


def test_unsupported_version_is_named(tmp_path, arrays):
    path = tmp_path / "ckpt"
    write_checkpoint(path, arrays)
    data = bytearray(path.read_bytes())
    at = FlatBuffer(data, "x").root().field(CKPT_VERSION)
    struct.pack_into("<i", data, at, 3)
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="version 3 is not supported.*newer"):
        read_checkpoint(path)


def test_data_size_mismatch_names_the_tensor(tmp_path, arrays):
    path = tmp_path / "ckpt"
    write_checkpoint(path, arrays)
    data = bytearray(path.read_bytes())
    tensor = FlatBuffer(data, "x").root().table(1).tables(0)[0]  # module_state.requires_grad_params[0]
    dims_at = tensor.vector(T_DIMS, 8)[0]
    struct.pack_into("<q", data, dims_at, 7)  # w: [6, 5] -> [7, 5]
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=r"tensor 'w' has 120 bytes of data, 140 expected for float32\[7, 5\]"):
        read_checkpoint(path)


def test_external_data_sidecar_missing_or_short(tmp_path, arrays):
    path = tmp_path / "ckpt"
    write_checkpoint(path, arrays, external_data=True)
    sidecar = tmp_path / "ckpt.data"
    data = sidecar.read_bytes()
    sidecar.write_bytes(data[:-8])
    with pytest.raises(CorruptFileError, match=r"ckpt\.data: tensor 'w' lies past the end"):
        read_checkpoint(path)
    with pytest.raises(CorruptFileError, match=r"external data of ckpt: open that"):
        read_checkpoint(sidecar)
    sidecar.unlink()
    with pytest.raises(CorruptFileError, match=r"ckpt\.data is missing"):
        read_checkpoint(path)


def test_opening_is_lazy(tmp_path):
    write_checkpoint(tmp_path / "big", {f"w{i}": np.full((256, 256), i, np.float32) for i in range(4)},
                     external_data=True)
    params = read_checkpoint(tmp_path / "big")
    arr = params["w3"].array()
    assert not arr.flags.owndata and not arr.flags.writeable  # a read-only view of the mmap, no copy
    assert arr[5, 7] == 3 and params.nbytes == 4 * 256 * 256 * 4
