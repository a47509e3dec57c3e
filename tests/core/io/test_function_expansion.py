"""Model-local functions whose calls multiply are refused before anything inlines them or infers
shapes through them (issue 27, item 4): 48 functions each calling the next twice (3.8 KB, 2^47
nodes expanded) hung inspect, bench and the app's open."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxport.core.io.model_functions import check_function_calls
from onnxport.core.io.model_io import load_graph
from onnxport.core.util.budgets import function_expansion_limit
from onnxport.core.util.errors import CorruptFileError

OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
CPU_S = 60  # without the check each of these ran for minutes of CPU (inference never ends)
HANG_S = 600  # wall clock: a bound against a hang only (a loaded machine is slower, not wrong)


def doubling_chain(levels: int, calls: int = 2) -> onnx.ModelProto:
    """`levels` functions, each calling the next `calls` times; the last is one Relu."""
    functions = []
    for i in range(levels):
        if i == levels - 1:
            body = [helper.make_node("Relu", ["a"], ["b"])]
        else:
            names = ["a"] + [f"t{k}" for k in range(calls - 1)] + ["b"]
            body = [helper.make_node(f"f{i + 1}", [names[k]], [names[k + 1]], domain="local") for k in range(calls)]
        functions.append(helper.make_function("local", f"f{i}", ["a"], ["b"], body, OPSETS))
    graph = helper.make_graph([helper.make_node("f0", ["x"], ["y"], domain="local")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=OPSETS, ir_version=8, functions=functions)


@pytest.fixture
def bomb(tmp_path):
    path = tmp_path / "bomb.onnx"
    onnx.save(doubling_chain(48), path)
    assert path.stat().st_size < 4096
    return path


def test_load_refuses_the_bomb_in_one_line_naming_the_function(bomb):
    with pytest.raises(CorruptFileError) as info:
        load_graph(bomb)
    text = str(info.value)
    assert "\n" not in text and str(bomb) in text
    assert "model-local function 'local:f0' expands to 422,212,465,065,982 nodes" in text


def cpu_bound() -> None:
    """In the child: SIGXCPU after CPU_S seconds of CPU (its children get the same bound)."""
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_S, resource.RLIM_INFINITY))


def bounded(command: list[str], what: str) -> subprocess.CompletedProcess:
    """Run `command` (without the check it would never end: no test may hang here)."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=HANG_S, preexec_fn=cpu_bound)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} still running after {HANG_S} s")
    assert proc.returncode != -signal.SIGXCPU, f"{what} used over {CPU_S} s of CPU"
    return proc


def run_child(code: str, what: str) -> str:
    proc = bounded([sys.executable, "-c", code], what)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_app_open_refuses_it(bomb):
    code = ("from onnxport.core.workflow.sources import open_sources\n"
            "from onnxport.core.util.errors import CorruptFileError\n"
            f"try: open_sources([{str(bomb)!r}])\n"
            "except CorruptFileError as exc: print(exc)")
    assert "'local:f0' expands to" in run_child(code, "the open")


@pytest.mark.parametrize("command", [
    ["inspect", "{m}"], ["inspect", "{m}", "--json"], ["export", "{m}", "--outputs", "y", "-o", "{d}/out.onnx"],
    ["bench", "{m}"], ["validate", "{m}", "--reference", "{m}"], ["quantize", "{m}", "-o", "{d}/q.onnx", "--mode", "fp16"],
])
def test_every_command_refuses_it_with_exit_2(bomb, command):
    args = [a.format(m=bomb, d=bomb.parent) for a in command]
    proc = bounded([sys.executable, "-m", "onnxport.core.cli", *args], f"onnxport {command[0]}")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "'local:f0' expands to" in proc.stderr
    assert sorted(p.name for p in bomb.parent.iterdir()) == ["bomb.onnx"]


def test_in_process_shape_inference_is_guarded_too():
    """Inference of an unchecked model (a path into the index that skipped the load's checks)
    gives no shapes instead of expanding it."""
    code = ("from tests.core.io.test_function_expansion import doubling_chain\n"
            "from onnxport.core.graph.shape_infer import inferred_value_infos\n"
            "print(len(inferred_value_infos(doubling_chain(48))))")
    assert run_child(code, "shape inference") == "0"


def test_functions_reused_within_the_bound_still_load_and_run(tmp_path):
    path = tmp_path / "ok.onnx"
    onnx.save(doubling_chain(12), path)  # 6,142 nodes expanded
    model = load_graph(path)
    import onnxruntime as ort
    got = ort.InferenceSession(path.read_bytes(), providers=["CPUExecutionProvider"]).run(
        None, {"x": np.array([-1.0, 2.0], np.float32)})[0]
    np.testing.assert_array_equal(got, [0.0, 2.0])
    assert len(model.functions) == 12


def test_the_bound_grows_with_the_nodes_the_file_stores():
    assert function_expansion_limit(10) == function_expansion_limit(0) >= 1_000_000
    assert function_expansion_limit(10_000_000) > 10_000_000
    check_function_calls(doubling_chain(3, calls=500))  # f0: 500 + 500 x (500 + 500 x 1) = 500,500 nodes
    with pytest.raises(CorruptFileError, match="'local:f0' expands to 250,250,500 nodes"):
        check_function_calls(doubling_chain(4, calls=500))
