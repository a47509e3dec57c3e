"""`onnxport --version` and `--help` start at once: one process (no restart), and the parser
imports none of onnx, numpy or onnxruntime (the commands import what they need when they run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("onnx", "numpy", "onnxruntime", "torch", "PySide6")

_PROBE = """
import contextlib, io, json, os, sys
print("started", os.getpid(), flush=True)
heavy = json.loads(sys.argv[2])
sys.argv = ["onnxport", *json.loads(sys.argv[1])]
from onnxport.core import cli
out = io.StringIO()
try:
    with contextlib.redirect_stdout(out):
        cli.run()
except SystemExit as exc:
    code = exc.code
print("result", json.dumps({"code": code, "out": out.getvalue(), "heavy": sorted(
    m for m in heavy if m in sys.modules)}), flush=True)
"""


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_version_and_help_run_in_one_process_without_heavy_imports(argv):
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(HEAVY)], env=env,
                          capture_output=True, text=True, timeout=600, check=True)
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith("started")] == [lines[0]]  # not restarted by exec
    result = json.loads(lines[-1].removeprefix("result "))
    assert result["code"] in (0, None)
    assert result["heavy"] == []
    assert ("onnxport 0.1" in result["out"]) if argv == ["--version"] else ("export" in result["out"])
