"""The CLI's one boundary (issue 36, item 4): an exception the core did not foresee - raised here by
the libraries themselves (json's RecursionError, onnx's InferenceError, numpy's MemoryError...)
inside a real `inspect` run - ends with one line "internal error: ... (details in <log>)" and exit
70, its traceback in the error log; JSON with --json; a signal that came first still decides the
exit (130); the log entry is escaped single lines, never a forged entry."""

from __future__ import annotations

import json
import signal

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxport.core.cli import main
from onnxport.core.cli.error_output import EXIT_INTERNAL_ERROR
from onnxport.core.util.error_log import error_log_path


@pytest.fixture(autouse=True)
def own_cache_folder(tmp_path, monkeypatch):
    """The error log goes to the test's folder, never the user's cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def deep_json() -> None:
    json.loads("[" * 200_000 + "]" * 200_000)  # a tokenizer.json nested 200,000 deep


def shape_inference_error() -> None:
    node = helper.make_node("Relu", ["x"], ["y"], domain="ai.onnx")  # the domain deploy met on ort-1.14
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.shape_inference.infer_shapes(model, strict_mode=True)


def scale_issue() -> None:
    scale = float(np.float32("nan"))
    assert scale == scale, "scale issue"  # noqa: PLR0124 - as ORT's quantizer asserts on all-NaN data


def bad_digit() -> None:
    int("²")  # `--dim batch=²` passes str.isdigit()


def too_big() -> None:
    np.empty(1 << 60, dtype=np.uint8)  # past any address space: refused by the allocator, nothing touched


LIBRARY_ERRORS = [(deep_json, RecursionError), (shape_inference_error, onnx.shape_inference.InferenceError),
                  (scale_issue, AssertionError), (bad_digit, ValueError), (too_big, MemoryError)]


def inspect_raising(monkeypatch, tmp_path, make_error):
    """A real `inspect` run whose source opening meets `make_error`'s library exception."""
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")

    def open_sources(*_args, **_kwargs):
        make_error()
        raise AssertionError("the library raised nothing")

    monkeypatch.setattr("onnxport.core.workflow.sources.open_sources", open_sources)
    return ["inspect", str(model)]


@pytest.mark.parametrize(("make_error", "kind"), LIBRARY_ERRORS, ids=[k.__name__ for _, k in LIBRARY_ERRORS])
def test_a_library_exception_is_one_line_naming_the_log(monkeypatch, tmp_path, capsys, make_error, kind):
    argv = inspect_raising(monkeypatch, tmp_path, make_error)
    assert main(argv) == EXIT_INTERNAL_ERROR != 2
    captured = capsys.readouterr()
    log = error_log_path()
    assert captured.out == "" and captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert captured.err.startswith("onnxport: error: internal error: ") and kind.__name__ in captured.err
    assert captured.err.rstrip().endswith(f"(details in {log})") and log.is_relative_to(tmp_path)
    text = log.read_text()
    assert text.startswith("=== ") and f"onnxport inspect {argv[1]}: " in text.splitlines()[0]
    assert "    Traceback (most recent call last):" in text and f"in {make_error.__name__}" in text


def test_json_internal_errors_are_json_on_stdout(monkeypatch, tmp_path, capsys):
    argv = inspect_raising(monkeypatch, tmp_path, bad_digit)
    assert main([*argv, "--json"]) == EXIT_INTERNAL_ERROR
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "InternalError" and error["type"] == "ValueError"
    assert error["log"] == str(error_log_path()) and error["message"].startswith("internal error: ValueError")


def test_a_signal_that_came_first_decides_the_exit(monkeypatch, tmp_path, capsys):
    def interrupted_then_broken() -> None:
        signal.raise_signal(signal.SIGINT)  # the handler only notes it; the run then fails
        bad_digit()

    argv = inspect_raising(monkeypatch, tmp_path, interrupted_then_broken)
    assert main(argv) == 128 + signal.SIGINT
    err = capsys.readouterr().err
    assert "interrupted" in err and "internal error" not in err and not error_log_path().exists()


def test_a_message_holding_newlines_and_controls_stays_one_line_in_both(monkeypatch, tmp_path, capsys):
    forged = "x.onnx\n=== 2020-01-01 00:00:00 forged entry\x1b[2J\x07"

    def named_badly() -> None:
        raise ValueError(forged)

    argv = inspect_raising(monkeypatch, tmp_path, named_badly)
    assert main(argv) == EXIT_INTERNAL_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\x07" not in err
    lines = error_log_path().read_text().splitlines()
    assert sum(line.startswith("===") for line in lines) == 1  # the forged header is inside a line
    assert all(line.startswith("    ") for line in lines[1:] if line) and "\\x1b[2J\\x07" in lines[0]
    assert not any(c in "".join(lines) for c in "\x1b\x07")
