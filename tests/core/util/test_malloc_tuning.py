"""Every onnxport process asks glibc's malloc for transparent huge pages (util/malloc_tuning.py):
the children the app and the CLI start, and the entry points themselves, restarted once."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from onnxport.core import cli
from onnxport.core.util import malloc_tuning
from onnxport.core.util.child_call import call_in_child
from onnxport.core.util.malloc_tuning import SETTING, is_tuned, tuned_environ

from . import child_functions as f

linux_glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or not malloc_tuning._on_glibc(),
                                 reason="glibc tunables")


def test_the_setting_joins_the_tunables_and_the_users_own_value_stands():
    assert tuned_environ({})["GLIBC_TUNABLES"] == SETTING
    assert tuned_environ({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})["GLIBC_TUNABLES"] == (
        f"glibc.malloc.arena_max=2:{SETTING}")
    assert tuned_environ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"})["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=0"
    assert is_tuned({"GLIBC_TUNABLES": SETTING}) and not is_tuned({"GLIBC_TUNABLES": "glibc.malloc.hugetlbx=1"})


_PROBE = """
import os, numpy as np
from onnxport.core.util.malloc_tuning import reexec_tuned
print("started", os.getpid(), flush=True)
reexec_tuned()
big = np.ones(64 << 20, np.uint8)  # past glibc's mmap threshold: a mapping of its own
start = big.ctypes.data
flags = ""
with open("/proc/self/smaps") as smaps:
    inside = False
    for line in smaps:
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= start < hi
        elif inside and line.startswith("VmFlags:"):
            flags = line
print("tuned", os.environ.get("GLIBC_TUNABLES"), os.getpid(), " hg " in flags + " ", flush=True)
"""


@linux_glibc
def test_a_process_restarts_itself_once_tuned_and_malloc_then_asks_for_huge_pages():
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120,
                          check=True)
    lines = done.stdout.split("\n")
    started = [line for line in lines if line.startswith("started")]
    assert len(started) == 2 and len(set(started)) == 1  # the same process, run again by execve, once
    assert lines[2] == f"tuned {SETTING} {started[0].split()[1]} True"  # glibc madvised the block (VmFlags hg)


@linux_glibc
def test_the_app_s_children_start_tuned(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert call_in_child(f.environment_value, "GLIBC_TUNABLES") == SETTING


@pytest.mark.parametrize(("argv", "expected"), [(["onnxport", "export", "m.onnx"], ["reexec", "main"]),
                                              (["onnxport"], ["reexec", "main"]),
                                              (["onnxport", "gui"], ["main"])])
def test_the_cli_entry_point_restarts_tuned_before_anything_runs_but_not_for_the_app(monkeypatch, argv, expected):
    """The app's own process stays untuned (latency: see util/malloc_tuning.py)."""
    calls = []
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(cli, "reexec_tuned", lambda: calls.append("reexec"))
    monkeypatch.setattr(cli, "main", lambda: calls.append("main") or 0)
    with pytest.raises(SystemExit):
        cli.run()
    assert calls == expected
