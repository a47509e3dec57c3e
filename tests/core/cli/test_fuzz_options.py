"""Fuzz what users type and models declare: `--shape`, `--dim`, `--target`, bench's `--batch`, and
the declared sizes of a model's inputs (issue 36, family 2 and 5).

Property, per example (run in fuzz_worker's process under its memory cap): parsing, planning the
generated inputs' shapes and the deploy side (target, fixed shapes, opset fit, the per-node target
check) end in a result or `OnnxportError`, never another exception; the budget gate for generated
inputs accepts exactly what an independent integer oracle accepts (no int64 wrap, no total
past GENERATED_TOTAL_MAX); accepted inputs up to 64 MiB are generated with their planned shapes;
each example's peak memory stays under PEAK_BUDGET_MIB.
Bounded and derandomized in `make test`; `ONNXPORT_FUZZ_EXAMPLES=5000 make fuzz` for a long run.
"""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import event, given
from hypothesis.errors import InvalidArgument

from ..fuzz_options import option_case
from ..fuzz_seeds import fuzz_settings
from ..fuzz_worker import FuzzWorker

PEAK_BUDGET_MIB = 300  # 64 MiB of generated inputs, twice over (values and their cast), and parsing


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz_options")
    worker = FuzzWorker(root / "worker.log")
    try:
        yield root, worker
    finally:
        worker.close()


def run(worker, data: bytes, options: dict) -> dict:
    root, process = worker
    (root / "model.onnx").write_bytes(data)
    (root / "options.json").write_text(json.dumps(options))
    reply = process.read("options", root / "model.onnx")
    with contextlib.suppress(InvalidArgument):  # outside a hypothesis test: no statistics
        event(reply["outcome"])
    assert reply["outcome"] != "bug", reply["detail"]
    assert reply["peak_mib"] <= PEAK_BUDGET_MIB, f"options took {reply['peak_mib']:.0f} MiB"
    return reply


@pytest.mark.parametrize(("declared", "options", "outcome"), [
    ([[1 << 32, 1 << 32]], {"shapes": [], "dims": []}, "too large to generate"),  # wraps to 0 in int64
    ([[1 << 28]] * 8, {"shapes": [], "dims": []}, "too large to generate"),  # eight 1 GiB inputs
    ([["batch", 4]], {"shapes": ["x0=4294967296x4294967296"], "dims": []}, "has 4 on axis 1"),
    ([["batch", "n"]], {"shapes": ["x0=4294967296x4294967296"], "dims": []}, "too large to generate"),
    ([["batch", 4]], {"shapes": [], "dims": ["batch=²"]}, "--dim expects"),
    ([["batch", 4]], {"shapes": [], "dims": [f"batch={1 << 80}"]}, "--dim expects"),
    ([["batch", 4]], {"shapes": [], "dims": ["batch=3"]}, "ok"),
])
def test_the_cases_of_issue_36(worker, declared, options, outcome):
    from onnx import TensorProto as T
    from onnx import helper

    ins = [helper.make_tensor_value_info(f"x{i}", T.FLOAT, s) for i, s in enumerate(declared)]
    outs = [helper.make_tensor_value_info(f"y{i}", T.FLOAT, None) for i in range(len(declared))]
    nodes = [helper.make_node("Identity", [f"x{i}"], [f"y{i}"]) for i in range(len(declared))]
    model = helper.make_model(helper.make_graph(nodes, "g", ins, outs), opset_imports=[helper.make_opsetid("", 17)])
    reply = run(worker, model.SerializeToString(), {"target": "ort-1.17", "batch": 2, "count": 2, **options})
    assert reply["outcome"] == "ok" if outcome == "ok" else outcome in reply["detail"], reply


@fuzz_settings(300, deadline_s=None)
@given(case=option_case())
def test_fuzzed_options_and_declared_sizes(worker, case):
    data, options = case
    run(worker, data, options)
