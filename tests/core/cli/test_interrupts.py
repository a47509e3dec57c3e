"""The CLI's one cancellation model (core/cli/interrupts.py): a signal cancels the token the core
call holds (no exception raised inside the core), the core's cleanup removes its temps, the run
ends with the interrupted line and 130/143; a second signal exits at once."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.api import export_for_inference
from onnxport.core.cli.interrupts import Interrupts, call_token
from onnxport.core.util.atomic import is_temp_name
from onnxport.core.util.errors import Cancelled
from tests.support.checkpoint_writer import write_checkpoint

NOTHING_WRITTEN = "nothing was written (unfinished files were removed)"


def small_eval(folder: Path) -> tuple[Path, Path]:
    """y = x + p0 + p1, the parameters as inputs (as ORT's eval graphs have them), and a checkpoint."""
    nodes = [helper.make_node("Add", ["x", "p0"], ["h0"], name="/add0"),
             helper.make_node("Add", ["h0", "p1"], ["h1"], name="/add1")]
    inputs = [helper.make_tensor_value_info(n, T.FLOAT, [64]) for n in ("x", "p0", "p1")]
    graph = helper.make_graph(nodes, "small", inputs, [helper.make_tensor_value_info("h1", T.FLOAT, [64])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, folder / "eval_model.onnx")
    write_checkpoint(folder / "checkpoint", {f"p{i}": np.full(64, i, np.float32) for i in range(2)})
    return folder / "eval_model.onnx", folder / "checkpoint"


def wait_for(condition, what: str, seconds: float = 300.0) -> None:  # a bound against a hang
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.005)


def temps(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if is_temp_name(p.name)]


def test_a_signal_cancels_the_token_the_core_sees_and_raises_nothing_inside_it(tmp_path):
    model, ckpt = small_eval(tmp_path)
    out = tmp_path / "m.onnx"
    out.write_bytes(b"the user's previous export")
    seen: list[bool] = []
    with Interrupts() as interrupts:
        token = call_token()

        def progress(fraction, message) -> None:
            if not seen:  # the signal comes while the core runs: no KeyboardInterrupt here
                signal.raise_signal(signal.SIGINT)
                wait_for(lambda: token.cancelled, "the token to be cancelled")
            seen.append(token.cancelled)

        with pytest.raises(Cancelled):
            export_for_inference(model, [ckpt], ["h1"], out, progress=progress, cancel=token)
        with pytest.raises(Cancelled):  # a signal came: the command makes no further core call
            call_token()
    assert interrupts.signum == signal.SIGINT and seen and all(seen)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    assert out.read_bytes() == b"the user's previous export" and temps(tmp_path) == []


# A command run by the real CLI entry point (`main`): its core call writes a temp, then either
# waits for the cancel and cleans up slowly ("cleanup": only a second signal ends it quickly), or
# blocks in a step that never checks the token until the test releases it ("blocking").
DRIVER = """
import argparse
import os
import sys
import time
from pathlib import Path

import onnxport.core.cli as cli
from onnxport.core.cli.interrupts import call_token
from onnxport.core.util.atomic import AtomicWrite

out, marks, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]


def core_call(dest, cancel):
    with AtomicWrite(dest) as write:
        fd, _temp = write.new_file()
        os.write(fd, b"partial")
        os.close(fd)
        (marks / "writing").touch()
        if mode == "cleanup":
            while not cancel.cancelled:
                time.sleep(0.005)
            (marks / "cleaning").touch()
            time.sleep(600)  # a cleanup that takes long
        else:
            while not (marks / "release").exists():  # never acts on the token; marks its cancel
                if cancel.cancelled and not (marks / "signalled").exists():
                    (marks / "signalled").touch()
                time.sleep(0.005)
        cancel.check()


def command(args):
    core_call(args.out, call_token())
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="onnxport")
    sub = parser.add_subparsers()
    slow = sub.add_parser("slow")
    slow.add_argument("-o", dest="out")
    slow.set_defaults(func=command)
    return parser


cli.build_parser = build_parser
sys.exit(cli.main(["slow", "-o", str(out)]))
"""


def start_driver(tmp_path: Path, mode: str) -> tuple[subprocess.Popen, Path, Path]:
    out, marks = tmp_path / "out" / "m.onnx", tmp_path / "marks"
    out.parent.mkdir()
    marks.mkdir()
    out.write_bytes(b"previous")
    child = subprocess.Popen([sys.executable, "-c", DRIVER, str(out), str(marks), mode],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return child, out, marks


def finish(child: subprocess.Popen) -> tuple[int, str]:
    try:
        _, stderr = child.communicate(timeout=300)  # a bound against a hang, under the bench's 600 s
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, stderr


@pytest.mark.parametrize("second, code, line", [(signal.SIGINT, 130, "interrupted"),
                                                (signal.SIGTERM, 143, "terminated by SIGTERM")])
def test_a_second_signal_during_the_cleanup_exits_at_once_without_temps(tmp_path, second, code, line):
    child, out, marks = start_driver(tmp_path, "cleanup")
    wait_for(lambda: (marks / "writing").exists() or child.poll() is not None, "the write to start")
    child.send_signal(signal.SIGINT)
    wait_for(lambda: (marks / "cleaning").exists() or child.poll() is not None, "the cleanup to start")
    assert child.poll() is None  # the first signal only cancelled: the cleanup runs
    child.send_signal(second)
    returncode, stderr = finish(child)  # not the cleanup's 600 s
    assert returncode == code, stderr
    assert stderr == f"onnxport: {line}; {NOTHING_WRITTEN}\n"
    assert out.read_bytes() == b"previous" and temps(out.parent) == []


@pytest.mark.parametrize("sig, code, line", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated by SIGTERM")])
def test_a_step_that_cannot_check_ends_at_the_check_after_it(tmp_path, sig, code, line):
    child, out, marks = start_driver(tmp_path, "blocking")
    wait_for(lambda: (marks / "writing").exists() or child.poll() is not None, "the write to start")
    child.send_signal(sig)
    wait_for(lambda: (marks / "signalled").exists() or child.poll() is not None, "the signal to arrive")
    assert child.poll() is None  # it arrived (the token is cancelled), and raised nothing in the blocking step
    (marks / "release").touch()
    returncode, stderr = finish(child)
    assert returncode == code, stderr
    assert stderr == f"onnxport: {line}; {NOTHING_WRITTEN}\n"
    assert out.read_bytes() == b"previous" and temps(out.parent) == []


def slow_model(path: Path, layers: int = 16) -> Path:
    """x [256, 512] through `layers` MatMuls with one 512 x 512 weight: a run takes milliseconds, so
    the bench's 10,000-run cap is minutes away."""
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"h{i - 1}", "w"], [f"h{i}"], name=f"/mm{i}")
             for i in range(layers)]
    weight = onnx.numpy_helper.from_array(np.full((512, 512), 1 / 512, np.float32), "w")
    graph = helper.make_graph(nodes, "slow", [helper.make_tensor_value_info("x", T.FLOAT, [256, 512])],
                              [helper.make_tensor_value_info(f"h{layers - 1}", T.FLOAT, [256, 512])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_ctrl_c_during_a_benchmark_stops_it_at_its_next_run(tmp_path):
    """A real core call that runs for minutes unless its token is cancelled: the bench checks it
    between runs, so the command ends long before its --seconds."""
    model = slow_model(tmp_path / "slow.onnx")
    child = subprocess.Popen([sys.executable, "-m", "onnxport.core.cli", "bench", str(model), "--seconds", "600",
                              "-v"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    while child.poll() is None:
        lines.append(child.stderr.readline())
        if "measuring" in lines[-1]:
            break
    assert child.poll() is None, "".join(lines)
    child.send_signal(signal.SIGINT)
    returncode, stderr = finish(child)
    assert returncode == 130, stderr
    assert stderr.splitlines()[-1] == f"onnxport: interrupted; {NOTHING_WRITTEN}" and "Traceback" not in stderr
