"""Runtimes are found in this environment, the make targets' environments and ONNXPORT_RUNTIMES,
each described by a child running in it; one that cannot answer is listed with the reason."""

from __future__ import annotations

import subprocess
import sys

import pytest

from onnxport.core.runtimes.discovery import Runtime, candidates, describe, find_runtimes, runtime_for
from onnxport.core.util.errors import OnnxportError

from .runtime_models import OPENVINO, openvino_python


def test_this_environment_comes_first_and_runs_cpu():
    own = find_runtimes()[0]
    assert own.own and own.python == sys.executable and own.error is None
    assert "CPUExecutionProvider" in own.providers and own.ort_version


def test_a_python_named_by_the_variable_is_described_by_a_child_in_it(monkeypatch):
    monkeypatch.setenv("ONNXPORT_RUNTIMES", f"/nowhere/python:{sys.executable}")
    found = dict(candidates())
    assert found["/nowhere/python"] == "ONNXPORT_RUNTIMES"
    assert describe("/nowhere/python", "ONNXPORT_RUNTIMES").error == "no such Python"
    import onnxruntime

    child = describe(sys.executable, "ONNXPORT_RUNTIMES")  # this Python, but asked through a child
    assert child.error is None and child.ort_version == onnxruntime.__version__
    assert child.providers == onnxruntime.get_available_providers()


def test_a_python_without_onnxruntime_is_listed_with_the_reason(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    bare = describe(str(tmp_path / "bare" / "bin" / "python"), "ONNXPORT_RUNTIMES")
    assert bare.error and "onnxruntime" in bare.error and "\n" not in bare.error
    assert "unusable" in bare.line()


def test_a_provider_no_runtime_has_is_one_line_saying_how_to_install_it():
    runtimes = [Runtime(sys.executable, "this environment", "1.0", providers=["CPUExecutionProvider"])]
    assert runtime_for("CPUExecutionProvider", runtimes) is runtimes[0]
    with pytest.raises(OnnxportError) as caught:
        runtime_for(OPENVINO, runtimes)
    assert "make runtime-openvino" in str(caught.value) and "\n" not in str(caught.value)


def test_the_openvino_environment_is_found_with_its_provider():
    python = openvino_python()
    runtime = describe(python, "make target")
    assert runtime.package == "onnxruntime-openvino" and OPENVINO in runtime.providers
    assert runtime_for(OPENVINO, find_runtimes()).python == python
