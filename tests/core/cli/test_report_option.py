"""`--report` never replaces an input or a pipe (issue 27, item 3): refused before any work."""

from __future__ import annotations

import os
import stat

import onnx
import pytest

from onnxport.core.cli import main

from ..model_builders import forward_mlp


@pytest.mark.parametrize("command", ["bench", "validate"])
def test_a_report_onto_the_model_or_a_pipe_exits_2_and_keeps_it(tmp_path, capsys, command):
    model = tmp_path / "m.onnx"
    onnx.save(forward_mlp(), model)
    before = model.read_bytes()
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    extra = ["--reference", str(model)] if command == "validate" else []
    for report, says in ((model, "would overwrite a file this run reads"), (pipe, "it is a named pipe")):
        assert main([command, str(model), *extra, "--report", str(report), "-q"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and says in err, err
    assert model.read_bytes() == before and stat.S_ISFIFO(os.stat(pipe).st_mode)
