"""Many outputs plan in linear time (issue 27, item 8: 200,000 graph outputs ran past 60 s on a
quadratic `name in list`). The check runs in a child under a CPU-time bound (CPU seconds, not the
wall clock: a loaded machine is slower, not wrong): a quadratic plan of 100,000 outputs takes over
a minute of CPU there, the linear one a few seconds, imports included."""

from __future__ import annotations

import signal

import onnx
from onnx import TensorProto, helper

from ..crafted_files import run_bounded

CPU_BOUND_S = 30
CHILD = """
import sys
import onnx
from onnxport.core.graph.graph_table import GraphTable, plan_prune_table
model = onnx.load(sys.argv[1])
table = GraphTable.read(model.graph)
names = [o.name for o in model.graph.output]
plan = plan_prune_table(model, table, names)
assert plan.outputs == names, "outputs reordered or lost"
print(len(plan.outputs))
"""


def test_a_hundred_thousand_outputs_plan_in_linear_time(tmp_path):
    n = 100_000
    nodes = [helper.make_node("Identity", ["x"], [f"y{i}"]) for i in range(n)]
    outputs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [1]) for i in range(n)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])], outputs)
    path = tmp_path / "outputs.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    proc = run_bounded(CHILD, limit_gb=4.0, cpu_s=CPU_BOUND_S, args=["-c", CHILD, str(path)])
    assert proc.returncode != -signal.SIGXCPU, f"the plan took over {CPU_BOUND_S} s of CPU"
    assert proc.returncode == 0 and proc.stdout.strip() == str(n), proc.stderr
