"""What a first-time user trips over on the CLI (issue 15): one test per paper cut, each on the exit
code and the exact line the user reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.cli import main
from onnxport.core.util.atomic import is_temp_name
from onnxport.core.util.text import human_size
from onnxport.gui.app import no_display_line
from tests.support.checkpoint_writer import write_checkpoint
from tests.support.marks import wait_for_mark

from ..model_builders import decisive_mlp_weights, eval_like_mlp, make_model, mlp_weights
from ..quant_models import save

PARAMS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
NO_DISPLAY = ("onnxport: no display (DISPLAY and WAYLAND_DISPLAY are unset), so the app cannot open; "
              "run it in a desktop session, or use the CLI ('make run' falls back to it: onnxport inspect/export)")


def eval_folder(folder: Path, hidden: int = 16, checkpoint: bool = True, decisive: bool = False) -> tuple[Path, Path]:
    """An ORT-style eval graph (parameters as inputs, loss on `labels`) with its checkpoint beside it;
    `decisive`: weights whose int8 form meets the accuracy target on any CPU (decisive_mlp_weights)."""
    model = Path(save(eval_like_mlp(d_hidden=hidden), folder / "eval_model.onnx"))
    ckpt = folder / "checkpoint"
    if checkpoint:
        weights = decisive_mlp_weights(seed=5, d_hidden=hidden) if decisive else mlp_weights(seed=5, d_hidden=hidden)
        write_checkpoint(ckpt, weights)
    return model, ckpt


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    err = "".join(line for line in captured.err.splitlines(True) if not line.startswith("["))  # no progress
    return code, captured.out, err


def graph_io(path: Path) -> tuple[list[str], list[str]]:
    graph = onnx.load(path).graph
    return [i.name for i in graph.input], [o.name for o in graph.output]


def files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if not is_temp_name(p.name)}


def test_1_forgetting_the_checkpoint_stops_with_one_line(tmp_path, capsys):
    model, ckpt = eval_folder(tmp_path)
    out = tmp_path / "m.onnx"
    code, stdout, err = run(capsys, "export", model, "--outputs", "logits", "-o", out, "-q")
    assert (code, stdout) == (2, "")
    assert err == (f"onnxport: error: {model}: no --checkpoint, so 4 parameter inputs (fc1.weight, fc1.bias, "
                   f"fc2.weight and 1 more) would stay inputs without values; pass the checkpoint with "
                   f"--checkpoint {ckpt} (or --keep-parameter-inputs to keep them as inputs)\n")
    assert not out.exists()

    code, _, err = run(capsys, "export", model, "--outputs", "logits", "-o", out, "-q", "--keep-parameter-inputs")
    assert (code, err) == (0, "")
    assert graph_io(out) == (["input", *PARAMS], ["logits"])

    code, _, err = run(capsys, "export", model, "--checkpoint", ckpt, "--outputs", "logits", "-o", out, "-q")
    assert (code, err) == (0, "")
    assert graph_io(out) == (["input"], ["logits"])


def test_1_without_a_checkpoint_beside_the_hint_says_ckpt(tmp_path, capsys):
    model, _ = eval_folder(tmp_path, checkpoint=False)
    code, _, err = run(capsys, "export", model, "--outputs", "probabilities", "-o", tmp_path / "m.onnx")
    assert code == 2 and err.count("\n") == 1
    assert err.endswith("pass the checkpoint with --checkpoint CKPT (or --keep-parameter-inputs to keep them as inputs)\n")


def test_2_outputs_default_to_the_suggested_ones_and_say_which(tmp_path, capsys):
    model, ckpt = eval_folder(tmp_path)
    code, stdout, _ = run(capsys, "inspect", model, "--json")
    suggested = json.loads(stdout)["model"]["default_outputs"]
    assert code == 0 and suggested == ["logits", "probabilities"]
    out = tmp_path / "m.onnx"
    code, stdout, err = run(capsys, "export", model, "--checkpoint", ckpt, "-o", out)
    assert code == 0
    assert err == "onnxport: no --outputs given; used the suggested outputs: logits, probabilities\n"
    assert stdout.startswith(f"wrote {out}: ") and "outputs logits, probabilities, inputs input," in stdout
    assert graph_io(out) == (["input"], suggested)


def test_2_a_graph_with_nothing_to_suggest_asks_for_outputs(tmp_path, capsys):
    loss = make_model([helper.make_node("SoftmaxCrossEntropyLoss", ["scores", "labels"], ["loss"], name="/loss")],
                      [helper.make_tensor_value_info("scores", T.FLOAT, ["n", 3]),
                       helper.make_tensor_value_info("labels", T.INT64, ["n"])],
                      [helper.make_tensor_value_info("loss", T.FLOAT, [])])
    model = Path(save(loss, tmp_path / "loss.onnx"))
    code, _, err = run(capsys, "export", model, "-o", tmp_path / "m.onnx")
    assert code == 2
    assert err == (f"onnxport: error: {model}: no suggested outputs to export (name them with --outputs; "
                   f"'onnxport inspect {model}' lists the tensors)\n")


def _no_display_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}


@pytest.mark.skipif(sys.platform in ("darwin", "win32"), reason="X11/Wayland systems only")
@pytest.mark.parametrize("command", [["-m", "onnxport.gui"], ["-m", "onnxport.core.cli", "gui"]])
def test_3_the_app_without_a_display_says_so_in_one_line(command):
    done = subprocess.run([sys.executable, *command], env=_no_display_env(), capture_output=True, text=True,
                          timeout=600)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", NO_DISPLAY + "\n")


def test_3_the_display_check_lets_headless_qt_platforms_and_displays_through():
    assert no_display_line({}, "linux") == NO_DISPLAY
    assert no_display_line({"QT_QPA_PLATFORM": "xcb"}, "linux") == NO_DISPLAY
    for env in ({"QT_QPA_PLATFORM": "offscreen"}, {"QT_QPA_PLATFORM": "vnc:size=800x600"},
                {"QT_QPA_PLATFORM": "wayland;minimal"}, {"DISPLAY": ":99"}, {"WAYLAND_DISPLAY": "wayland-0"}):
        assert no_display_line(env, "linux") is None, env
    assert no_display_line({}, "darwin") is None and no_display_line({}, "win32") is None


def test_4_inspecting_a_file_of_no_known_kind_exits_2(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("my training notes\n")
    code, stdout, err = run(capsys, "inspect", notes)
    assert (code, stdout) == (2, "")
    assert err == (f"onnxport: error: {notes}: not an ONNX model or parameter file onnxport can read "
                   "(give an .onnx model, a checkpoint or a folder holding them)\n")


# `onnxport export` as the CLI runs it, held right after the commit of one file (argv[2]) until a
# signal has cancelled the run's tokens: the signal comes after that commit and before the next
# step ends, however loaded the machine (no race between the signal and the writes).
HELD_EXPORT = """
import sys, time
from pathlib import Path

from onnxport.core.cli import interrupts, main
from onnxport.core.util import atomic

marks, held = Path(sys.argv[1]), Path(sys.argv[2])
real_commit = atomic.AtomicWrite.commit


def commit(self, moves, **kwargs):
    placed = real_commit(self, moves, **kwargs)
    if held.name in {p.name for p in placed}:
        (marks / "committed").touch()
        run = interrupts._active[-1]
        while run.signum is None or not all(t.cancelled for t in list(run._tokens)):
            time.sleep(0.005)
    return placed


atomic.AtomicWrite.commit = commit
sys.exit(main(sys.argv[3:]))
"""


def _interrupt_after(model: Path, ckpt: Path, out: Path, held: Path, marks: Path) -> subprocess.CompletedProcess:
    """Run `export --validate --quantize dynamic`, SIGINT it once `held` is committed."""
    marks.mkdir()
    args = ["export", str(model), "--checkpoint", str(ckpt), "--outputs", "logits", "-o", str(out), "--validate",
            "--quantize", "dynamic", "-q"]
    child = subprocess.Popen([sys.executable, "-c", HELD_EXPORT, str(marks), str(held), *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_mark(marks / "committed", child, f"{held.name} was not committed")
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=300)
        return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("wait_for", ["m.onnx", "m.int8.onnx"])
def test_5_ctrl_c_after_a_commit_says_what_was_written(tmp_path, wait_for):
    folder = tmp_path / "models"
    folder.mkdir()
    model, ckpt = eval_folder(folder, hidden=256, decisive=True)  # int8 pays and meets the target
    done = _interrupt_after(model, ckpt, folder / "m.onnx", folder / wait_for, tmp_path / "marks")
    written = [n for n in ("m.onnx", "m.int8.onnx") if (folder / n).exists()]
    assert done.returncode == 130, done.stderr
    assert wait_for in written and files(folder) == {"eval_model.onnx", "checkpoint", *written}
    listed = ", ".join(str(folder / n) for n in written)
    assert done.stderr == (f"onnxport: interrupted; already written: {listed} (complete); "
                           "unfinished files were removed\n")


def test_5_ctrl_c_before_anything_is_written_says_nothing_was():
    from onnxport.core.util.written_files import WrittenFiles, interrupted_line

    assert interrupted_line("interrupted", None) == \
        "onnxport: interrupted; nothing was written (unfinished files were removed)"
    assert interrupted_line("interrupted", WrittenFiles("no/such/folder/m.onnx")).endswith("nothing was written "
                                                                                           "(unfinished files were removed)")


def test_5_an_error_after_the_export_was_written_names_it(tmp_path, capsys):
    """A quantization that fails after the export was put in place: the error line says the export is there."""
    relu = make_model([helper.make_node("Add", ["x", "b"], ["s"], name="/add"),
                       helper.make_node("Relu", ["s"], ["y"], name="/relu")],
                      [helper.make_tensor_value_info("x", T.FLOAT, ["n", 4])],
                      [helper.make_tensor_value_info("y", T.FLOAT, ["n", 4])],
                      [numpy_helper.from_array(np.ones(4, np.float32), "b")])
    model = Path(save(relu, tmp_path / "relu.onnx"))
    out = tmp_path / "r.onnx"
    code, _, err = run(capsys, "export", model, "-o", out, "--quantize", "dynamic", "-q")
    assert code == 2 and err.count("\n") == 1
    assert "found nothing to quantize" in err and err.endswith(f"; already written: {out}\n")
    assert files(tmp_path) == {"relu.onnx", "r.onnx"}


@pytest.mark.parametrize("n, text", [(None, "?"), (0, "0 B"), (823, "823 B"), (1536, "1.5 KB"),
                                     (12.3 * 2**20, "12.3 MB"), (2.4 * 2**30, "2.4 GB"), (3 * 2**40, "3.0 TB")])
def test_9_sizes_in_human_units(n, text):
    assert human_size(n) == text


def test_9_cli_output_shows_small_models_in_human_units(tmp_path, capsys):
    model, ckpt = eval_folder(tmp_path, hidden=256, decisive=True)
    out = tmp_path / "m.onnx"
    code, stdout, _ = run(capsys, "export", model, "--checkpoint", ckpt, "--outputs", "logits", "-o", out, "-q")
    assert code == 0 and f"wrote {out}: {human_size(out.stat().st_size)}, outputs logits" in stdout
    q = tmp_path / "q.onnx"
    code, stdout, _ = run(capsys, "quantize", out, "-o", q, "--mode", "dynamic", "-q")
    assert code == 0, stdout
    assert f"wrote {q}: dynamic, {human_size(q.stat().st_size)} (" in stdout
    assert f"% of {human_size(out.stat().st_size)}), " in stdout
    code, stdout, _ = run(capsys, "bench", out, q)
    assert code == 0 and f"m.onnx: {human_size(out.stat().st_size)}, p50" in stdout
    assert "0.00 MB" not in stdout


def test_10_one_wording_for_a_missing_file(tmp_path, capsys):
    model, ckpt = eval_folder(tmp_path)
    out = tmp_path / "m.onnx"
    assert run(capsys, "export", model, "--checkpoint", ckpt, "--outputs", "logits", "-o", out, "-q")[0] == 0
    nope = tmp_path / "nope"
    commands = [
        ["inspect", f"{nope}.onnx"],
        ["inspect", model, "--checkpoint", nope],
        ["export", f"{nope}.onnx", "--outputs", "x", "-o", tmp_path / "o.onnx"],
        ["export", model, "--checkpoint", nope, "--outputs", "logits", "-o", tmp_path / "o.onnx"],
        ["validate", out, "--reference", f"{nope}.onnx"],
        ["validate", out, "--reference", model, "--checkpoint", ckpt, "--inputs", f"{nope}.npz"],
        ["bench", f"{nope}.onnx"],
        ["quantize", f"{nope}.onnx", "-o", tmp_path / "q.onnx", "--mode", "dynamic"],
        ["quantize", out, "-o", tmp_path / "q.onnx", "--mode", "static", "--calibration", f"{nope}.npz"],
    ]
    for args in commands:
        missing = next(str(a) for a in args if str(a).startswith(str(nope)))
        code, stdout, err = run(capsys, *args)
        assert (code, stdout, err) == (2, "", f"onnxport: error: {missing}: no such file or folder\n"), args


def test_11_a_training_only_output_is_exported_with_a_warning(tmp_path, capsys):
    model, ckpt = eval_folder(tmp_path)
    out = tmp_path / "m.onnx"
    code, _, err = run(capsys, "export", model, "--checkpoint", ckpt, "--outputs", "onnx::loss::1,logits",
                       "-o", out, "-q")
    assert code == 0
    assert err == ("onnxport: warning: onnx::loss::1 is training-only (part of the loss computation; the app "
                   "greys it out); labels stays an input because of it\n")
    assert graph_io(out) == (["input", "labels"], ["onnx::loss::1", "logits"])
    code, _, err = run(capsys, "export", model, "--checkpoint", ckpt, "--outputs", "logits", "-o", out, "-q")
    assert (code, err) == (0, "")


def test_export_reads_the_graph_once(tmp_path, monkeypatch):
    """The review's graph is the one exported: parsing and checking a 23k-node graph twice cost
    ~0.2 s of every `onnxport export`."""
    from onnxport.core.export import export as export_module
    from onnxport.core.workflow import sources

    model, checkpoint = eval_folder(tmp_path)
    loads = []
    for module in (sources, export_module):
        real = module.load_graph

        def counted(path, real=real):
            loads.append(Path(path).name)
            return real(path)

        monkeypatch.setattr(module, "load_graph", counted)
    for ckpt in ([], ["--checkpoint", str(checkpoint)]):
        loads.clear()
        assert main(["export", str(model), *ckpt, "--keep-parameter-inputs", "--outputs", "logits",
                     "-o", str(tmp_path / "out.onnx"), "-q"]) == 0
        assert loads == [model.name]
