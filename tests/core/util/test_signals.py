"""A real `onnxport export` of a ~100 MB model, signalled mid-write: SIGTERM/SIGINT remove the temps
and keep the old output; after a SIGKILL (which nothing can catch) the next run removes them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.util.atomic import is_temp_name
from tests.support.checkpoint_writer import write_checkpoint
from tests.support.marks import wait_for_mark

TENSORS, WIDTH = 12, 2 << 20  # 12 x 8 MiB float32 parameters: ~100 MB to write and fsync


@pytest.fixture(scope="module")
def big_model(tmp_path_factory) -> tuple[Path, Path]:
    """An eval graph adding TENSORS parameter vectors (inputs, as ORT's eval graphs have them) and
    its checkpoint."""
    folder = tmp_path_factory.mktemp("big")
    names = [f"p{i}" for i in range(TENSORS)]
    nodes, current = [], "x"
    for i, name in enumerate(names):
        nodes.append(helper.make_node("Add", [current, name], [f"h{i}"], name=f"/add{i}"))
        current = f"h{i}"
    inputs = [helper.make_tensor_value_info(n, T.FLOAT, [WIDTH]) for n in ["x", *names]]
    graph = helper.make_graph(nodes, "big", inputs, [helper.make_tensor_value_info(current, T.FLOAT, [WIDTH])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, folder / "eval_model.onnx")
    write_checkpoint(folder / "checkpoint", {n: np.full(WIDTH, i, np.float32) for i, n in enumerate(names)})
    return folder / "eval_model.onnx", folder / "checkpoint"


def start_export(big_model, out: Path, *extra: str) -> subprocess.Popen:
    model, ckpt = big_model
    return subprocess.Popen(
        [sys.executable, "-m", "onnxport.core.cli", "export", str(model), "--checkpoint", str(ckpt),
         "--outputs", f"h{TENSORS - 1}", "-o", str(out), "-q", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if is_temp_name(p.name))


# `onnxport export` as the CLI runs it (argv[3:]), held right after its first temp in the output's
# folder (argv[1]) exists until a signal has cancelled the run's tokens (a SIGKILL ends it there);
# argv[2]/writing says it is held. The signal comes mid-write however loaded the machine: no poll
# races the write.
HELD_EXPORT = """
import sys, time
from pathlib import Path

from onnxport.core.cli import interrupts, main
from onnxport.core.util.atomic import AtomicWrite

folder, marks = Path(sys.argv[1]), Path(sys.argv[2])


def held(make):
    def method(self):
        made = make(self)
        if self.folder == folder and not (marks / "writing").exists():
            (marks / "writing").touch()
            run = interrupts._active[-1]
            while run.signum is None or not all(t.cancelled for t in list(run._tokens)):
                time.sleep(0.005)
        return made
    return method


AtomicWrite.new_file, AtomicWrite.new_dir = held(AtomicWrite.new_file), held(AtomicWrite.new_dir)
sys.exit(main(sys.argv[3:]))
"""


def interrupt_mid_write(big_model, out: Path, sig: int, marks: Path, *extra: str) -> subprocess.CompletedProcess:
    """Export `big_model` to `out`, sending `sig` while its first temp is being written."""
    model, ckpt = big_model
    args = ["export", str(model), "--checkpoint", str(ckpt), "--outputs", f"h{TENSORS - 1}", "-o", str(out), "-q",
            *extra]
    child = subprocess.Popen([sys.executable, "-c", HELD_EXPORT, str(out.parent), str(marks), *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_mark(marks / "writing", child, "the export did not start writing")
        assert any(f".{child.pid}." in name for name in temps(out.parent))  # mid-write: its temp is there
        child.send_signal(sig)
        stdout, stderr = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    done = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    done.pid = child.pid
    return done


@pytest.mark.parametrize("sig, code, line", [(signal.SIGTERM, 143, "terminated by SIGTERM"),
                                             (signal.SIGINT, 130, "interrupted")])
@pytest.mark.parametrize("external", ["never", "always"])
def test_a_signal_mid_write_removes_the_temps_and_keeps_the_old_output(big_model, tmp_path, tmp_path_factory, sig,
                                                                       code, line, external):
    out = tmp_path / "model.onnx"
    out.write_bytes(b"the user's previous export")
    done = interrupt_mid_write(big_model, out, sig, tmp_path_factory.mktemp("marks"), "--external-data", external)
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and line in lines[0] and "Traceback" not in done.stderr
    assert out.read_bytes() == b"the user's previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]  # no temp, no data file


def test_after_a_sigkill_the_next_run_removes_the_dead_runs_temps(big_model, tmp_path, tmp_path_factory):
    out = tmp_path / "model.onnx"
    out.write_bytes(b"the user's previous export")
    done = interrupt_mid_write(big_model, out, signal.SIGKILL, tmp_path_factory.mktemp("marks"), "--external-data",
                               "always")
    assert done.returncode == -signal.SIGKILL
    left = temps(tmp_path)
    assert left and all(f".{done.pid}." in name for name in left)  # nothing runs on SIGKILL: they stay
    assert out.read_bytes() == b"the user's previous export"
    again = start_export(big_model, out, "--external-data", "always")
    _, stderr = again.communicate(timeout=600)  # a bound against a hang
    assert again.returncode == 0, stderr
    assert temps(tmp_path) == []
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 2 and names[0] == "model.onnx" and names[1].startswith("model.onnx.")
    model = onnx.load(out, load_external_data=False)
    assert {e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"} == {names[1]}
    assert os.path.getsize(tmp_path / names[1]) >= TENSORS * WIDTH * 4
