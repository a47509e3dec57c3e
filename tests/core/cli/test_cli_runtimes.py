"""`onnxport runtimes`, and `--providers` on validate and bench: the JSON contract, exit codes
(0 every provider meets the target, 1 naming those that do not, 2 for bad input: one line)."""

from __future__ import annotations

import json

import onnx
import pytest

from onnxport.core.cli import main

from ..runtimes.runtime_models import OPENVINO, mixed_model, openvino_python

KEYS = {"provider", "runtime", "ort_version", "nodes_on_provider", "nodes_on_cpu", "nodes_in_file", "outputs",
        "p50_ms", "load_s"}


def test_runtimes_json_lists_this_environment_with_cpu(capsys):
    assert main(["runtimes", "--json"]) == 0
    runtimes = json.loads(capsys.readouterr().out)["runtimes"]
    assert runtimes[0]["source"] == "this environment" and "CPUExecutionProvider" in runtimes[0]["providers"]


@pytest.mark.parametrize("argv", [["validate", "M", "--providers", "cpu,openvno"],
                                  ["bench", "M", "--providers", "cpu,gpu"],
                                  ["validate", "M", "--providers", "coreml"],
                                  ["validate", "M", "--provider-option", "openvino:precision=FP16"],
                                  ["validate", "M", "--providers", "openvino", "--provider-option", "openvino:FP16"],
                                  ["bench", "M", "M", "--providers", "cpu"],
                                  ["bench", "M", "--providers", "cpu", "--batch", "2"],
                                  ["validate", "M"]])
def test_bad_provider_input_is_one_line_exit_2(argv, tmp_path, capsys):
    model = mixed_model(tmp_path / "m.onnx")
    assert main([str(model) if a == "M" else a for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("onnxport: error:")
    if "coreml" in argv:  # not installed anywhere here: how to get it
        assert "is not installed" in err and "ONNXPORT_RUNTIMES" in err


def test_validate_on_openvino_json_contract_and_exit_0(tmp_path, capsys):
    openvino_python()
    model = mixed_model(tmp_path / "m.onnx")
    report_path = tmp_path / "report.json"
    code = main(["validate", str(model), "--providers", "cpu,openvino", "--provider-option",
                 "openvino:device_type=CPU", "--seconds", "0.05", "--json", "-q", "--report", str(report_path)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["passed"] is True and json.loads(report_path.read_text())["providers"]
    cpu, ov = report["providers"]
    assert KEYS <= set(ov) and ov["provider"] == OPENVINO and ov["options"] == {"device_type": "CPU"}
    assert (ov["nodes_on_provider"], ov["nodes_on_cpu"], ov["nodes_in_file"]) == (4, 1, 5)
    assert ov["outputs"][0]["name"] == "y" and ov["outputs"][0]["cosine"] >= 0.999
    assert ov["p50_ms"] > 0 and cpu["p50_ms"] > 0 and ov["against_cpu"]["verdict"]


def test_validate_names_the_providers_below_the_target_and_exits_1(tmp_path, capsys):
    openvino_python()
    model = mixed_model(tmp_path / "m.onnx")
    assert main(["validate", str(model), "--providers", "openvino", "--min-cosine", "1.5", "--seconds", "0", "-q"]) == 1
    out = capsys.readouterr().out
    assert "providers FAILED (openvino)" in out and out.strip().endswith("below the accuracy target or not run: openvino")


def test_bench_on_providers_shows_latency_against_cpu(tmp_path, capsys):
    openvino_python()
    model = mixed_model(tmp_path / "m.onnx")
    assert main(["bench", str(model), "--providers", "openvino", "--seconds", "0.05", "-q"]) == 0
    out = capsys.readouterr().out
    assert "openvino (OpenVINOExecutionProvider" in out and "against CPU:" in out and "fell back to CPU" in out


def test_validate_with_a_reference_and_providers_reports_both(tmp_path, capsys):
    openvino_python()
    model = mixed_model(tmp_path / "m.onnx")
    code = main(["validate", str(model), "--reference", str(model), "--providers", "openvino", "--seconds", "0",
                 "--json", "-q"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["validation"]["passed"] and report["providers_run"]["passed"] and report["passed"]
    assert [p["provider"] for p in report["providers"]] == ["CPUExecutionProvider", OPENVINO]


def test_quantize_runs_the_written_model_on_the_providers(tmp_path, capsys):
    openvino_python()
    from onnxport.core.export.export import export_model

    from ..model_builders import forward_mlp, mlp_weights

    onnx.save(forward_mlp(mlp_weights(d_hidden=256)), tmp_path / "forward.onnx")
    export_model(tmp_path / "forward.onnx", tmp_path / "fp32.onnx", ["logits"])
    out = tmp_path / "int8.onnx"
    code = main(["quantize", str(tmp_path / "fp32.onnx"), "-o", str(out), "--mode", "dynamic", "--int8-path", "avx2",
                 "--providers", "openvino", "--json", "-q"])
    report = json.loads(capsys.readouterr().out)
    cpu, ov = report["providers"]
    assert out.exists() and report["providers_run"]["model"] == str(out.absolute())
    assert ov["provider"] == OPENVINO and ov["error"] is None and ov["nodes_on_provider"] > 0
    assert code == (0 if report["passed"] else 1) and report["providers_run"]["thresholds"]["min_cosine"] == 0.99
