"""Background children run at a lower priority on every CPU (no pinning); ONNX Runtime sizes its
thread pool to the CPUs a process may use (core/util/background.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from onnxport.core.util.background import BACKGROUND_NICE, allowed_cpu_count, make_background


def test_a_background_child_runs_niced_on_the_callers_cpus():
    mine = os.sched_getaffinity(0)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        make_background(proc)
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == BACKGROUND_NICE
        assert os.sched_getaffinity(proc.pid) == mine  # never pinned
    finally:
        proc.kill()
        proc.wait()
    assert os.sched_getaffinity(0) == mine  # the caller keeps its own


def test_onnx_runtime_threads_follow_the_allowed_cpus():
    """ORT's default pool counts the machine's cores; on fewer allowed CPUs the session is sized to
    them (as many intra-op threads as CPUs), and the benchmark report says so."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: no narrower affinity to give")
    code = (
        "import os\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "from onnxport.core.util.background import allowed_cpu_count\n"
        "from onnxport.core.evaluate.runtime import session_options\n"
        "print(allowed_cpu_count(), session_options().intra_op_num_threads, session_options(threads=3).intra_op_num_threads)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", "1", "3"]


def test_all_cpus_allowed_leaves_onnx_runtime_its_default():
    if len(os.sched_getaffinity(0)) < (os.cpu_count() or 1):
        pytest.skip("this test process runs on fewer CPUs than the machine has")
    assert allowed_cpu_count() is None
