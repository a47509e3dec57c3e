"""Provider names: short or full, case-insensitive; CPU first; an unknown one is one line naming the known."""

from __future__ import annotations

import pytest

from onnxport.core.runtimes.names import full_name, how_to_get, provider_names
from onnxport.core.util.errors import OnnxportError


def test_short_and_full_names_mean_the_same_provider():
    assert full_name("openvino") == full_name("OpenVINOExecutionProvider") == full_name("OPENVINO")
    assert full_name("dml") == "DmlExecutionProvider" and full_name("tensorrt") == "TensorrtExecutionProvider"
    assert full_name("cuda") == full_name("CUDA") == "CUDAExecutionProvider"


def test_the_list_starts_with_cpu_the_reference_and_names_each_once():
    assert provider_names("openvino,cpu,openvino") == ["CPUExecutionProvider", "OpenVINOExecutionProvider"]


@pytest.mark.parametrize("text", ["cpu,opnevino", "", " , "])
def test_an_unknown_or_empty_list_is_one_line(text):
    with pytest.raises(OnnxportError) as caught:
        provider_names(text)
    message = caught.value.one_line()
    assert "\n" not in message and ("openvino" in message or "no provider" in message)


def test_how_to_get_names_the_make_target_and_the_variable():
    line = how_to_get("OpenVINOExecutionProvider")
    assert "make runtime-openvino" in line and "ONNXPORT_RUNTIMES" in line and "onnxruntime-openvino" in line
    assert "make runtime-gpu" in how_to_get("TensorrtExecutionProvider")
