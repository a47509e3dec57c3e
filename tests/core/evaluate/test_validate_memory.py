"""Validating an early exit reads only the weights it needs from the reference.

An export of an early layer of a 4 GB model used to be validated against the whole reference
loaded into memory (4.7x the parameter bytes at 1B parameters, bench/decoder_bench.py); the
reference is now pruned to the export's outputs before any weight is read, and ONNX Runtime reads
the kept ones from the reference's folder. Measured in a child process (its own peak RSS), with a
256 MB weight the early exit does not need: a sparse file, so nothing big is written here.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.evaluate.validate import validate
from onnxport.core.export.export import export_model

BIG = 64 << 20  # float32 elements: 256 MB
CHILD = r"""
import json, sys
from onnxport.core.evaluate.validate import validate
import onnxruntime  # imported before the baseline
def hwm():
    return int([l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM")][0]) * 1024
before = hwm()
report = validate(sys.argv[1], sys.argv[2], dim_sizes={"n": 4})
print(json.dumps({"grew": hwm() - before, "passed": report.passed}))
"""


def _external(name: str, location: str, dims: list[int]) -> onnx.TensorProto:
    t = onnx.TensorProto(name=name, data_type=T.FLOAT, dims=dims)
    t.data_location = T.EXTERNAL
    t.external_data.add(key="location", value=location)
    return t


def two_stage_model(folder) -> None:
    """h = x + a (a: 4 floats in a.bin); y = ReduceSum(big) + h (big: 256 MB in big.bin)."""
    (folder / "a.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    with open(folder / "big.bin", "wb") as f:
        f.truncate(BIG * 4)
    nodes = [helper.make_node("Add", ["x", "a"], ["h"], name="first"),
             helper.make_node("ReduceSum", ["big"], ["s"], name="sum", keepdims=0),
             helper.make_node("Add", ["h", "s"], ["y"], name="second")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, ["n", 4])],
                              [_external("a", "a.bin", [4]), _external("big", "big.bin", [BIG])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (folder / "model.onnx").write_bytes(model.SerializeToString())


def test_an_early_exit_is_validated_without_reading_the_weights_it_does_not_need(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    two_stage_model(source)
    early = tmp_path / "early.onnx"
    export_model(source / "model.onnx", early, ["h"])
    assert validate(early, source / "model.onnx", dim_sizes={"n": 4}).passed  # in process: it works
    out = subprocess.run([sys.executable, "-c", CHILD, str(early), str(source / "model.onnx")],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["passed"]
    assert result["grew"] < (BIG * 4) // 4, result  # the 256 MB weight was never read
