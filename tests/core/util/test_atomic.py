"""core/atomic.py: temps beside the destination, commit as a unit, cleanup on failure, stale temps
of dead runs removed; and a model with external data replaced as one unit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxport.core.export.export import export_model
from onnxport.core.export.options import ExportOptions
from onnxport.core.util import atomic
from onnxport.core.util.atomic import AtomicWrite, folder_lock, remove_stale_temps
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import CancelToken

from ..model_builders import forward_mlp, mlp_weights, reference_mlp

TEMP = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.onnxport-tmp")


def names(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temps_are_hidden_named_for_their_owner_and_committed_in_order(tmp_path):
    dest = tmp_path / "model.onnx"
    dest.write_bytes(b"old")
    with AtomicWrite(dest) as tx:
        fd, tmp = tx.new_file()
        os.write(fd, b"new model")
        os.close(fd)
        dfd, dtmp = tx.new_file()
        os.write(dfd, b"new data")
        os.close(dfd)
        match = TEMP.fullmatch(tmp.name)
        assert match and match["name"] == "model.onnx" and int(match["pid"]) == os.getpid()
        assert tmp.stat().st_mode & 0o777 == 0o600  # private until committed
        assert set(atomic.live_temps()) >= {tmp, dtmp}
        data = tx.companion("data")
        assert re.fullmatch(r"model\.onnx\.[0-9a-f]{8}\.data", data.name)
        written = tx.commit([(dtmp, data), (tmp, dest)])
    assert written == [data, dest]
    assert dest.read_bytes() == b"new model" and data.read_bytes() == b"new data"
    assert dest.stat().st_mode & 0o777 == 0o644
    assert names(tmp_path) == sorted(["model.onnx", data.name])
    assert not set(atomic.live_temps()) & {tmp, dtmp}


def test_an_error_removes_the_temps_and_keeps_the_destination(tmp_path):
    dest = tmp_path / "out.json"
    dest.write_bytes(b"old")
    with pytest.raises(RuntimeError), AtomicWrite(dest) as tx:
        tx.new_file()
        (tx.new_dir() / "staged.onnx").write_bytes(b"x")
        raise RuntimeError("disk full, say")
    assert names(tmp_path) == ["out.json"] and dest.read_bytes() == b"old"


def test_a_failed_last_rename_takes_back_the_companions_already_placed(tmp_path):
    dest = tmp_path / "model.onnx"
    with AtomicWrite(dest) as tx:
        fd, tmp = tx.new_file()
        os.close(fd)
        dfd, dtmp = tx.new_file()
        os.close(dfd)
        dest.mkdir()  # something took the name meanwhile: the final rename fails
        (dest / "keep").write_text("x")
        with pytest.raises(OnnxportError, match="cannot write .*model.onnx"):
            tx.commit([(dtmp, tx.companion("data")), (tmp, dest)])
    assert names(tmp_path) == ["model.onnx"] and names(dest) == ["keep"]


def test_a_folder_is_committed_whole_or_file_by_file_into_an_existing_one(tmp_path):
    """What training artifacts need: a fresh folder renamed into place, or its files into an
    existing one (the model file last)."""
    dest = tmp_path / "artifacts"
    for round_ in (1, 2):
        with AtomicWrite(dest) as tx:
            work = tx.new_dir()
            for name in ("checkpoint", "eval_model.onnx"):
                (work / name).write_text(f"{name} {round_}")
            if dest.exists():
                tx.commit([(work / "checkpoint", dest / "checkpoint"), (work / "eval_model.onnx", dest / "eval_model.onnx")])
            else:
                tx.commit([(work, dest)])
        assert names(tmp_path) == ["artifacts"]
        assert [(dest / n).read_text() for n in names(dest)] == [f"checkpoint {round_}", f"eval_model.onnx {round_}"]
    assert dest.stat().st_mode & 0o777 == 0o755


def test_obsolete_files_go_only_after_the_commit(tmp_path):
    dest = tmp_path / "model.onnx"
    old_data = tmp_path / "model.onnx.0badc0de.data"
    old_data.write_bytes(b"old data")
    with AtomicWrite(dest) as tx:
        fd, tmp = tx.new_file()
        os.close(fd)
        tx.commit([(tmp, dest)], obsolete=lambda: [old_data] if old_data.exists() else [])
    assert names(tmp_path) == ["model.onnx"]


def test_stale_temps_of_dead_runs_go_live_ones_stay(tmp_path):
    dead, alive = dead_pid(), os.getppid()
    stale = tmp_path / f".model.onnx.{dead}.0123abcd.onnxport-tmp"
    stale_dir = tmp_path / f".model.onnx.{dead}.4567abcd.onnxport-tmp"
    live = tmp_path / f".model.onnx.{alive}.89abcdef.onnxport-tmp"
    other = tmp_path / f".other.onnx.{dead}.0123abcd.onnxport-tmp"
    legacy_old = tmp_path / ".model.onnx.ab_cd123.tmp"  # onnxport before core/atomic.py (mkstemp)
    legacy_new = tmp_path / ".model.onnx.data.xy_z9876.tmp"
    for p in (stale, live, other, legacy_old, legacy_new):
        p.write_bytes(b"partial")
    stale_dir.mkdir()
    (stale_dir / "model.onnx").write_bytes(b"partial")
    day_ago = time.time() - 2 * atomic.LEGACY_AGE
    os.utime(legacy_old, (day_ago, day_ago))
    removed = remove_stale_temps(tmp_path, "model.onnx")
    assert sorted(p.name for p in removed) == sorted([stale.name, stale_dir.name, legacy_old.name])
    assert names(tmp_path) == sorted([live.name, other.name, legacy_new.name])
    with AtomicWrite(tmp_path / "other.onnx"):  # every write starts with the sweep
        pass
    assert not other.exists()


def test_remove_live_temps_is_what_a_front_end_calls_when_terminating(tmp_path):
    tx = AtomicWrite(tmp_path / "m.onnx").start()
    fd, tmp = tx.new_file()
    os.close(fd)
    work = tx.new_dir()
    assert set(atomic.remove_live_temps()) >= {tmp, work}
    assert names(tmp_path) == []
    tx.discard()  # the write's own cleanup afterwards is harmless


def weights(seed: int) -> dict[str, np.ndarray]:
    return mlp_weights(d_in=8, d_hidden=64, seed=seed)


def export(src, out, seed, **kwargs):
    from onnxport.core.io.readers import read_parameters

    ckpt = src.parent / f"ckpt{seed}.npz"
    np.savez(ckpt, **weights(seed))
    return export_model(src, out, ["probabilities"], read_parameters(ckpt),
                        options=ExportOptions(external_data="always"), **kwargs)


def written_by(out, seeds=(1, 2, 3, 4)) -> int:
    """The run whose weights `out` computes with, checking that `out` names exactly one data file,
    which exists beside it, and that no other data file of `out` is left."""
    model = onnx.load(out, load_external_data=False)
    locations = {e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"}
    assert len(locations) == 1
    data_files = [p.name for p in out.parent.iterdir() if p.name.startswith(out.name + ".")]
    assert data_files == list(locations)
    x = np.ones((2, 8), np.float32)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    matches = [s for s in seeds if np.allclose(got, reference_mlp(x, weights(s))[1], atol=1e-6)]
    assert len(matches) == 1
    return matches[0]


@pytest.fixture
def src(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    path = folder / "forward.onnx"
    onnx.save(forward_mlp(weights(0)), path)
    return path


def test_each_run_names_its_own_data_file_and_removes_the_previous_one(src, tmp_path):
    out = tmp_path / "out" / "m.onnx"
    out.parent.mkdir()
    first = export(src, out, seed=1)
    assert written_by(out) == 1
    second = export(src, out, seed=2)
    assert second.data_path != first.data_path and not first.data_path.exists()
    assert written_by(out) == 2
    # a model written by an older onnxport (data in m.onnx.data) is replaced the same way
    second.data_path.unlink()
    onnx.save(forward_mlp(weights(3)), out, save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    export(src, out, seed=4)
    assert written_by(out) == 4
    # inline: no data file left behind
    export_model(src, out, ["probabilities"], options=ExportOptions(external_data="never"))
    assert names(out.parent) == ["m.onnx"]


def test_a_run_committing_inside_another_runs_write_never_mixes_them(src, tmp_path):
    """Run B writes the same path completely while run A is between writing and renaming: A's
    model ends up with A's data, and B's data file (named by the model A replaced) is gone."""
    out = tmp_path / "out" / "m.onnx"
    out.parent.mkdir()

    def progress(fraction, message):
        if message == "syncing to disk" and not progress.done:
            progress.done = True
            export(src, out, seed=2)

    progress.done = False
    export(src, out, seed=1, progress=progress, cancel=CancelToken())
    assert written_by(out) == 1


def test_concurrent_runs_to_one_path_commit_one_at_a_time(src, tmp_path):
    """Two runs reach their commit point while the folder is locked; when it is released they
    commit one after the other, and the survivor is a whole model with its own data."""
    out = tmp_path / "out" / "m.onnx"
    out.parent.mkdir()
    tokens = [CancelToken(), CancelToken()]
    errors = []

    def run(seed, token):
        try:
            export(src, out, seed=seed, cancel=token)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    with folder_lock(out.parent):
        threads = [threading.Thread(target=run, args=(seed, tokens[seed - 1])) for seed in (1, 2)]
        for t in threads:
            t.start()
        for _ in range(2000):
            if all(t.committed for t in tokens) or errors:
                break
            threads[0].join(0.01)
        assert all(t.committed for t in tokens) and not out.exists()  # both wait on the lock
    for t in threads:
        t.join()
    assert not errors
    assert written_by(out) in (1, 2)
