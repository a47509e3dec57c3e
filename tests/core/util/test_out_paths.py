"""Outputs never replace a device, a pipe or a file the run reads (issue 27, items 2 and 3)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys

import numpy as np
import onnx
import pytest

from onnxport.core.export.export import export_model
from onnxport.core.io.readers import read_parameters
from onnxport.core.util.atomic import AtomicWrite, is_temp_name
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.out_paths import check_kind, check_output
from tests.support.checkpoint_writer import write_checkpoint

from ..model_builders import eval_like_mlp, forward_mlp, mlp_weights


def _specials(tmp_path):
    fifo = tmp_path / "pipe.onnx"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock.onnx"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    link = tmp_path / "link.onnx"
    link.symlink_to(fifo)
    found = {"a named pipe": fifo, "a socket": sock_path, "a named pipe ": link}
    device = tmp_path / "null.onnx"  # a device of our own: a missing guard must never replace /dev/null
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        found["a device"] = device
    except OSError:  # no CAP_MKNOD here: the device case is covered by check_kind on /dev/null below
        pass
    return found, sock


def test_special_destinations_are_refused_and_left_as_they_are(tmp_path):
    specials, sock = _specials(tmp_path)
    try:
        for kind, path in specials.items():
            mode = os.stat(path).st_mode
            with pytest.raises(OnnxportError, match=f"it is {kind.strip()}"):
                check_kind(path)
            with pytest.raises(OnnxportError, match="replaces only regular files"), AtomicWrite(path) as tx:
                tx.new_file()
            assert os.stat(path).st_mode == mode
    finally:
        sock.close()
    with pytest.raises(OnnxportError, match="it is a device"):
        check_kind("/dev/null")
    assert not [p for p in os.listdir(tmp_path) if is_temp_name(p)]
    regular = tmp_path / "model.onnx"
    regular.write_bytes(b"old")
    (tmp_path / "to_regular.onnx").symlink_to(regular)
    check_kind(regular)
    check_kind(tmp_path / "to_regular.onnx")  # a symlink to a regular file is a regular destination
    check_kind(tmp_path / "new.onnx")
    check_kind(tmp_path, folder_ok=True)


def test_a_pipe_made_after_start_is_refused_at_commit(tmp_path):
    dest = tmp_path / "out.onnx"
    with AtomicWrite(dest) as tx:
        fd, tmp = tx.new_file()
        os.close(fd)
        os.mkfifo(dest)
        with pytest.raises(OnnxportError, match="named pipe"):
            tx.commit([(tmp, dest)])
    assert stat.S_ISFIFO(os.stat(dest).st_mode)


def test_export_onto_a_device_or_pipe_exits_2_before_any_work(tmp_path):
    model = tmp_path / "forward.onnx"
    onnx.save(forward_mlp(), model)
    fifo = tmp_path / "out.onnx"
    os.mkfifo(fifo)
    for dest in (fifo,):  # never /dev/null here: without the guard, a root run would replace it
        proc = subprocess.run([sys.executable, "-m", "onnxport.core.cli", "export", str(model), "--outputs",
                               "logits", "-o", str(dest), "-q"], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "replaces only regular files" in proc.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["forward.onnx", "out.onnx"]


def test_same_inode_by_any_path_is_refused(tmp_path):
    source = tmp_path / "in" / "ckpt"
    source.parent.mkdir()
    source.write_bytes(b"trained")
    hard = tmp_path / "hard"
    os.link(source, hard)
    soft = tmp_path / "soft"
    soft.symlink_to(source)
    for dest in (source, hard, soft, tmp_path / "in" / ".." / "in" / "ckpt"):
        with pytest.raises(OnnxportError, match="would overwrite the checkpoint"):
            check_output(dest, {source: "the checkpoint"})
    with pytest.raises(OnnxportError, match="would overwrite a file this run reads"):
        check_output(hard, [source.parent])  # a folder stands for its files
    check_output(tmp_path / "other", [source])


@pytest.fixture
def eval_dir(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    onnx.save(eval_like_mlp(), folder / "eval_model.onnx")
    return folder


@pytest.mark.parametrize("external", [False, True])
def test_export_onto_its_checkpoint_or_sidecar_is_refused(eval_dir, external):
    ckpt = write_checkpoint(eval_dir / "checkpoint", mlp_weights(), external_data=external)
    targets = [ckpt, ckpt.with_name("checkpoint.data")] if external else [ckpt]
    for dest in targets:
        before = dest.read_bytes()
        with pytest.raises(OnnxportError, match="would overwrite a parameter file this run reads"):
            export_model(eval_dir / "eval_model.onnx", dest, ["logits"], read_parameters(ckpt))
        assert dest.read_bytes() == before


def test_export_onto_the_models_external_data_is_refused(tmp_path):
    model = tmp_path / "m.onnx"
    onnx.save(forward_mlp(), model, save_as_external_data=True, location="m.bin", size_threshold=0)
    data = tmp_path / "m.bin"
    before = data.read_bytes()
    with pytest.raises(OnnxportError, match="would overwrite the external data of m.onnx"):
        export_model(model, data, ["logits"])
    assert data.read_bytes() == before
    np.testing.assert_array_equal(np.frombuffer(before, np.uint8), np.frombuffer(data.read_bytes(), np.uint8))


def test_quantize_onto_its_calibration_data_or_external_data_is_refused(tmp_path):
    from onnxport.core.quantize.quantize import QuantizeOptions, quantize

    model = tmp_path / "m.onnx"
    onnx.save(forward_mlp(), model, save_as_external_data=True, location="m.bin", size_threshold=0)
    calibration = tmp_path / "calib.npz"
    np.savez(calibration, input=np.zeros((2, 8), np.float32))
    for dest, what in ((tmp_path / "m.bin", "external data"), (calibration, "a data file this run reads")):
        before = dest.read_bytes()
        with pytest.raises(OnnxportError, match=what):
            quantize(model, dest, "static", QuantizeOptions(calibration=calibration))
        assert dest.read_bytes() == before


def test_deploy_onto_its_model_or_external_data_is_refused(tmp_path):
    from onnxport.core.deploy.deploy import deploy

    model = tmp_path / "m.onnx"
    onnx.save(forward_mlp(), model, save_as_external_data=True, location="weights.onnx", size_threshold=0)
    for dest, what in ((model, "the source model"), (tmp_path / "weights.onnx", "the external data of m.onnx")):
        before = dest.read_bytes()
        with pytest.raises(OnnxportError, match=what):
            deploy(model, "ort-1.17", dest)
        assert dest.read_bytes() == before


def test_replacing_a_model_never_deletes_a_data_file_the_run_reads(tmp_path):
    # the old out.onnx and the source both name out.onnx.<run id>.data: the write would delete it
    old = tmp_path / "out.onnx"
    onnx.save(forward_mlp(), old, save_as_external_data=True, location="out.onnx.0123abcd.data", size_threshold=0)
    source = tmp_path / "in.onnx"
    source.write_bytes(old.read_bytes())
    data = tmp_path / "out.onnx.0123abcd.data"
    before = data.read_bytes()
    with pytest.raises(OnnxportError, match="would delete out.onnx.0123abcd.data, the external data of in.onnx"):
        export_model(source, old, ["logits"])
    assert data.read_bytes() == before
    export_model(source, tmp_path / "other.onnx", ["logits"])


def test_export_quantize_and_report_never_land_on_an_input(tmp_path, capsys):
    from onnxport.core.cli import main

    model = tmp_path / "m.onnx"
    onnx.save(forward_mlp(), model)
    ckpt = tmp_path / "out.int8.onnx"  # a checkpoint where `-o out.onnx --quantize dynamic` writes
    write_checkpoint(ckpt, mlp_weights())
    before = ckpt.read_bytes()
    code = main(["export", str(model), "--checkpoint", str(ckpt), "--outputs", "logits",
                 "-o", str(tmp_path / "out.onnx"), "--quantize", "dynamic", "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "out.int8.onnx: the output would overwrite a file this run reads" in err, err
    assert ckpt.read_bytes() == before and not (tmp_path / "out.onnx").exists()


def test_export_onto_its_calibration_data_is_refused_before_writing(tmp_path, capsys):
    from onnxport.core.cli import main

    model = tmp_path / "m.onnx"
    onnx.save(forward_mlp(), model)
    calibration = tmp_path / "calib.onnx"
    np.savez(tmp_path / "calib.npz", input=np.zeros((2, 8), np.float32))
    (tmp_path / "calib.npz").rename(calibration)
    before = calibration.read_bytes()
    code = main(["export", str(model), "--outputs", "logits", "-o", str(calibration), "--quantize", "static",
                 "--calibration", str(calibration), "-q"])
    assert code == 2 and "a file this run reads" in capsys.readouterr().err
    assert calibration.read_bytes() == before
