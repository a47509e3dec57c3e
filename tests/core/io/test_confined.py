"""One confinement rule for every file a source names (issue 27, item 6): a checkpoint's `.data`
sidecar, a legacy folder's `.pbseq` files and a model's external data are read only from inside
their folder; a symlink out is refused in one line, the outside bytes never reach an export."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnxport.core.export.export import export_model
from onnxport.core.io.checkpoint import read_checkpoint
from onnxport.core.io.confined import ConfinementError, confined_file
from onnxport.core.util.errors import CorruptFileError
from tests.support.checkpoint_writer import write_checkpoint

from ..model_builders import eval_like_mlp, mlp_weights
from .test_checkpoint import write_pbseq


def test_the_rule(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "w.bin").write_bytes(b"x")
    (tmp_path / "secret").write_bytes(b"outside")
    (folder / "out").symlink_to(tmp_path / "secret")
    (folder / "in").symlink_to(folder / "w.bin")
    (folder / "sub").mkdir()
    os.mkfifo(folder / "pipe")
    path, st = confined_file("in", folder)
    assert path == (folder / "w.bin").resolve() and st.st_size == 1
    refused = {"../secret": "leads outside", "out": "leads outside", "/etc/passwd": "absolute path",
               "C:x": "absolute path", "a\x00b": "not a file name", "": "empty", "missing": "not found",
               "sub": "not a regular file", "pipe": "not a regular file", "sub/..": "leads outside"}
    for name, says in refused.items():
        with pytest.raises(ConfinementError, match=says):
            confined_file(name, folder, "weight file")


@pytest.fixture
def outside_checkpoint(tmp_path):
    """A folder whose checkpoint's `.data` is a symlink to another checkpoint's, outside it."""
    other = tmp_path / "other"
    other.mkdir()
    secret = {k: v + 100 for k, v in mlp_weights().items()}
    write_checkpoint(other / "checkpoint", secret, external_data=True)
    run = tmp_path / "run"
    run.mkdir()
    write_checkpoint(run / "checkpoint", mlp_weights(), external_data=True)
    (run / "checkpoint.data").unlink()
    (run / "checkpoint.data").symlink_to(other / "checkpoint.data")
    onnx.save(eval_like_mlp(), run / "eval_model.onnx")
    return run


def test_a_checkpoint_data_file_symlinked_out_is_refused(outside_checkpoint):
    run = outside_checkpoint
    with pytest.raises(CorruptFileError, match="external data file 'checkpoint.data' leads outside") as info:
        params = read_checkpoint(run / "checkpoint")
        export_model(run / "eval_model.onnx", run / "out.onnx", ["logits"], params)
    assert "\n" not in str(info.value)
    assert not (run / "out.onnx").exists()


def test_a_checkpoint_data_file_symlinked_inside_is_read(tmp_path):
    write_checkpoint(tmp_path / "checkpoint", mlp_weights(), external_data=True)
    (tmp_path / "checkpoint.data").rename(tmp_path / "real.data")
    (tmp_path / "checkpoint.data").symlink_to("real.data")
    params = read_checkpoint(tmp_path / "checkpoint")
    np.testing.assert_array_equal(params["fc1.weight"].array(), mlp_weights()["fc1.weight"])


def test_a_legacy_pbseq_symlinked_out_is_refused(tmp_path):
    outside = tmp_path / "outside.pbseq"
    write_pbseq(outside, [numpy_helper.from_array(np.full(4, 7, np.float32), "w")])
    folder = tmp_path / "ckpt"
    folder.mkdir()
    write_pbseq(folder / "paramfrozen_tensors.pbseq", [numpy_helper.from_array(np.ones(2, np.float32), "b")])
    (folder / "paramtrain_tensors.pbseq").symlink_to(outside)
    with pytest.raises(CorruptFileError, match="checkpoint file 'paramtrain_tensors.pbseq' leads outside"):
        read_checkpoint(folder)
    (folder / "paramtrain_tensors.pbseq").unlink()
    write_pbseq(folder / "train.bin", [numpy_helper.from_array(np.zeros(3, np.float32), "w")])
    (folder / "paramtrain_tensors.pbseq").symlink_to("train.bin")  # inside: read
    assert sorted(read_checkpoint(folder)) == ["b", "w"]


def test_a_hugging_face_cache_snapshot_reads_its_blobs_and_nothing_else(tmp_path):
    repo = tmp_path / "models--org--m"
    snapshot = repo / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "blobs" / "f00d").write_bytes(b"weights")
    (snapshot / "model.safetensors").symlink_to("../../blobs/f00d")
    (tmp_path / "secret").write_bytes(b"outside")
    (snapshot / "other").symlink_to(tmp_path / "secret")
    (repo / "blobs" / "link").symlink_to(tmp_path / "secret")  # a blob that leads out
    (snapshot / "via_blob").symlink_to("../../blobs/link")
    path, _ = confined_file("model.safetensors", snapshot)
    assert path == (repo / "blobs" / "f00d").resolve()
    for name in ("other", "via_blob", "../../blobs/f00d/../../../secret"):
        with pytest.raises(ConfinementError, match="leads outside"):
            confined_file(name, snapshot)
