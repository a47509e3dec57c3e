"""Fuzz output paths against a run's inputs (issue 27, items 2 and 3).

Property, for every destination drawn (each file the run reads, reached directly, through a
symlink, a hard link, `sub/..`, an absolute path; a named pipe; a file the run does not read; a
new name) and each writing entry (export with a checkpoint, export of a model with external
data, quantize): a destination that is one of the run's inputs or not a regular file is refused
with one line, before anything is written; in every case no input changes, no pipe is replaced,
and no temp file is left behind.
"""

from __future__ import annotations

import itertools
import os
import stat

import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from onnxport.core.export.export import export_model
from onnxport.core.io.readers import read_parameters
from onnxport.core.util.atomic import is_temp_name
from onnxport.core.util.errors import OnnxportError
from tests.support.checkpoint_writer import write_checkpoint

from ..fuzz_seeds import fuzz_settings
from ..model_builders import eval_like_mlp, forward_mlp, mlp_weights

INPUTS = ["eval.onnx", "ckpt", "ckpt.data", "forward.onnx", "weights.bin"]
TARGETS = [*INPUTS, "notes.txt", "pipe", "new.onnx"]
VIA = ["direct", "symlink", "hardlink", "dotdot", "absolute"]
RUNS = ["export_checkpoint", "export_external", "quantize"]


def _build(folder):
    folder.mkdir()
    onnx.save(eval_like_mlp(), folder / "eval.onnx")
    write_checkpoint(folder / "ckpt", mlp_weights(), external_data=True)
    onnx.save(forward_mlp(), folder / "forward.onnx", save_as_external_data=True, location="weights.bin",
              size_threshold=0)
    (folder / "notes.txt").write_text("not read by any run")
    os.mkfifo(folder / "pipe")
    (folder / "sub").mkdir()


def _reads(run: str) -> set[str]:
    return {"export_checkpoint": {"eval.onnx", "ckpt", "ckpt.data"}}.get(run, {"forward.onnx", "weights.bin"})


def _snapshot(folder) -> dict[str, object]:
    found = {}
    for entry in os.scandir(folder):
        st_ = entry.stat(follow_symlinks=False)
        found[entry.name] = ("pipe" if stat.S_ISFIFO(st_.st_mode) else "dir" if stat.S_ISDIR(st_.st_mode)
                             else os.readlink(entry.path) if stat.S_ISLNK(st_.st_mode)
                             else open(entry.path, "rb").read())
    return found


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("out_paths"), itertools.count()


@fuzz_settings(60, deadline_s=None)
@given(run=st.sampled_from(RUNS), target=st.sampled_from(TARGETS), via=st.sampled_from(VIA))
def test_outputs_never_replace_an_input_or_a_pipe(root, run, target, via):
    base, counter = root
    folder = base / f"case{next(counter)}"
    _build(folder)
    dest = folder / target
    if via == "symlink":
        dest = folder / "link.onnx"
        dest.symlink_to(target)
    elif via == "hardlink" and target not in ("pipe", "new.onnx"):
        dest = folder / "hard.onnx"
        os.link(folder / target, dest)
    elif via == "dotdot":
        dest = folder / "sub" / ".." / target
    elif via == "absolute":
        dest = dest.resolve()
    before = _snapshot(folder)
    must_refuse = target in _reads(run) or target == "pipe"
    try:
        if run == "export_checkpoint":
            export_model(folder / "eval.onnx", dest, ["logits"], read_parameters(folder / "ckpt"))
        elif run == "export_external":
            export_model(folder / "forward.onnx", dest, ["logits"])
        else:
            from onnxport.core.quantize.quantize import quantize

            quantize(folder / "forward.onnx", dest, "fp16")
        refused = None
    except OnnxportError as exc:
        refused = str(exc)
    after = _snapshot(folder)
    if must_refuse:
        assert refused is not None and "\n" not in refused, f"{run} wrote {target} via {via}"
        assert after == before
    for name in _reads(run) | {"pipe"}:
        assert after[name] == before[name], f"{run} to {target} via {via} changed {name}"
    assert not [n for n in after if is_temp_name(n)]
