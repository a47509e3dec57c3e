"""A model on several providers against CPU: where ONNX Runtime put its nodes (its own placement),
the accuracy per output, the latency beside CPU's (interleaved, with an interval), and a provider
that cannot run the model failing with ORT's reason."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from onnxport.core.evaluate.compare import Thresholds
from onnxport.core.runtimes.discovery import describe, find_runtimes
from onnxport.core.runtimes.names import CPU
from onnxport.core.runtimes.run_on import run_on_providers
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken

from .runtime_models import OPENVINO, mixed_model, newer_model, openvino_python


@pytest.fixture(scope="module")
def runtimes():
    found = find_runtimes()
    openvino_python()  # skips (or fails under make test) without the OpenVINO environment
    return found


def test_cpu_alone_runs_every_node_and_is_its_own_reference(tmp_path):
    own = [describe(sys.executable, "this environment")]
    report = run_on_providers(mixed_model(tmp_path / "m.onnx"), [CPU], runtimes=own, seconds=0.05)
    (cpu,) = report.results
    assert cpu.nodes_in_file == cpu.nodes_partitioned == cpu.nodes_on_provider == 5 and cpu.nodes_on_cpu == 0
    assert cpu.ran == {CPU: cpu.ran[CPU]} and cpu.p50_ms > 0 and cpu.load_s >= 0 and cpu.ratio is None
    assert report.passed


def test_openvino_takes_what_it_can_and_hardmax_falls_back_to_cpu(tmp_path, runtimes):
    model = mixed_model(tmp_path / "m.onnx")
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    np.savez(tmp_path / "x.npz", x=x)
    report = run_on_providers(model, [OPENVINO], inputs=tmp_path / "x.npz", runtimes=runtimes, seconds=0.05)
    cpu, ov = report.results
    assert ov.error is None and ov.package == "onnxruntime-openvino"
    assert (ov.nodes_on_provider, ov.nodes_on_cpu, ov.cpu_nodes, ov.nodes_in_file) == (4, 1, ["hm"], 5)
    assert ov.ran[OPENVINO] == 2 and ov.ran[CPU] == 1  # two compiled subgraphs around the Hardmax
    (y,) = ov.outputs
    assert y.name == "y" and y.cosine >= 0.999 and y.max_abs_diff < 1e-4 and y.passed
    assert ov.p50_ms > 0 and ov.load_s > 0 and ov.ratio is not None and ov.ratio.low <= ov.ratio.median <= ov.ratio.high
    assert ov.ratio.blocks >= 6 and report.passed
    assert ov.precision.startswith("fp32") and ov.reduced_precision in (False, None)


def test_a_target_not_met_fails_the_provider_by_name(tmp_path, runtimes):
    report = run_on_providers(mixed_model(tmp_path / "m.onnx"), [OPENVINO], runtimes=runtimes, seconds=0,
                              thresholds=Thresholds(min_cosine=1.5))
    assert not report.passed and report.failing() == ["openvino"]
    assert "cosine" in report.results[1].outputs[0].reason and report.results[1].p50_ms is None


def test_a_runtime_too_old_for_the_model_says_so_for_that_provider(tmp_path, runtimes):
    import onnxruntime

    if tuple(int(v) for v in onnxruntime.__version__.split(".")[:2]) < (1, 26):
        pytest.skip("this environment's onnxruntime is not newer than the OpenVINO one")
    report = run_on_providers(newer_model(tmp_path / "new.onnx", 26, 13), [OPENVINO], runtimes=runtimes, seconds=0)
    cpu, ov = report.results
    assert cpu.error is None and ov.error.startswith("ONNX Runtime 1.24.1 cannot load this model: ")
    assert "opset" in ov.error.lower() and "::" not in ov.error and not report.passed


def test_provider_options_reach_the_provider_and_its_refusal_is_its_reason(tmp_path, runtimes):
    report = run_on_providers(mixed_model(tmp_path / "m.onnx"), [OPENVINO], runtimes=runtimes, seconds=0,
                              options={OPENVINO: {"precision": "FP16"}})
    ov = report.results[1]
    assert ov.options == {"precision": "FP16"} and ov.reduced_precision is True
    assert ov.error.startswith(f"{OPENVINO} did not start here: ") and "precision" in ov.error
    ok = run_on_providers(mixed_model(tmp_path / "m.onnx"), [OPENVINO], runtimes=runtimes, seconds=0,
                          options={OPENVINO: {"device_type": "CPU", "precision": "ACCURACY"}}).results[1]
    assert ok.error is None and ok.options["precision"] == "ACCURACY" and ok.outputs[0].passed


def test_a_cancel_stops_the_run_and_its_children(tmp_path, runtimes):
    token = CancelToken()

    def progress(fraction, message):
        if "timing" in message:
            token.cancel()

    with pytest.raises(Cancelled):
        run_on_providers(mixed_model(tmp_path / "m.onnx"), [OPENVINO], runtimes=runtimes, seconds=30,
                         progress=progress, cancel=token)


def test_an_unreadable_model_is_one_line(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    with pytest.raises(OnnxportError):
        run_on_providers(tmp_path / "bad.onnx", [CPU], runtimes=[describe(sys.executable, "this environment")], seconds=0)


def test_never_inside_another_child(tmp_path):
    from onnxport.core.util.child_call import call_in_child

    with pytest.raises(OnnxportError, match="starts processes of its own"):
        call_in_child(run_on_providers, mixed_model(tmp_path / "m.onnx"), [CPU], seconds=0)
