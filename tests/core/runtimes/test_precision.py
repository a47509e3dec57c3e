"""What each provider computes in, said beside its accuracy: from the options given, the provider's
documented default, and the CPU's bf16 instructions where OpenVINO's CPU plugin may use them."""

from __future__ import annotations

from onnxport.core.runtimes.precision import precision


def test_openvino_on_cpu_is_fp32_unless_the_cpu_has_bf16_instructions():
    assert precision("OpenVINOExecutionProvider", {}, []) == ("fp32 (OpenVINO's default on CPU)", False)
    said, reduced = precision("OpenVINOExecutionProvider", {}, ["amx_bf16"])
    assert reduced is None and "bf16" in said and "precision=ACCURACY" in said


def test_openvino_gpu_and_npu_default_to_fp16_and_an_asked_precision_is_reported():
    said, reduced = precision("OpenVINOExecutionProvider", {"device_type": "GPU"}, [])
    assert reduced is True and said.startswith("fp16")
    assert precision("OpenVINOExecutionProvider", {"precision": "ACCURACY"}, ["amx_bf16"])[1] is False
    assert precision("OpenVINOExecutionProvider", {"precision": "FP16"}, []) == ("fp16 (precision=FP16)", True)


def test_tensorrt_fp16_and_cuda_tf32_are_said():
    assert precision("TensorrtExecutionProvider", {"trt_fp16_enable": "1"}, [])[1] is True
    assert precision("TensorrtExecutionProvider", {"trt_fp16_enable": "False"}, [])[1] is False
    assert precision("CUDAExecutionProvider", {}, [])[1] is None  # TF32 depends on the GPU
    assert precision("CUDAExecutionProvider", {"use_tf32": "0"}, []) == ("fp32 (use_tf32=0)", False)
    assert precision("CPUExecutionProvider", {}, ["amx_bf16"]) == ("fp32", False)
