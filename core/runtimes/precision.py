"""What a provider computes in: said beside its accuracy, since reduced precision is where it differs.

`precision(provider, options, cpu_flags)` -> (what it computes in, reduced: True / False / None
when it depends on hardware the report cannot see). From the provider options given (OpenVINO's
`precision` and `device_type`, TensorRT's `trt_fp16_enable`/`trt_bf16_enable`/`trt_int8_enable`,
CUDA's `use_tf32`, QNN's `enable_htp_fp16_precision`) and each provider's documented default; the
CPU's bf16/AMX instructions (probe.cpu_flags) tell where OpenVINO's CPU plugin may pick bf16.
"""

from __future__ import annotations

ON = ("1", "true", "yes", "on")


def precision(provider: str, options: dict, cpu_flags: list[str]) -> tuple[str, bool | None]:
    rule = RULES.get(provider)
    return rule({k: str(v) for k, v in options.items()}, set(cpu_flags)) if rule else ("fp32", False)


def _openvino(options: dict, flags: set) -> tuple[str, bool | None]:
    asked = options.get("precision", "").upper()
    device = options.get("device_type", "CPU").upper()
    if asked:
        return f"{asked.lower()} (precision={asked})", asked in ("FP16", "BF16")
    if not device.startswith("CPU"):
        return f"fp16 (OpenVINO's default on {device}; precision=FP32 or ACCURACY to change it)", True
    if flags & {"amx_bf16", "avx512_bf16"}:
        return ("fp32 asked; this CPU has bf16 instructions, on which OpenVINO's CPU plugin may compute "
                "in bf16 (precision=ACCURACY keeps the model's)", None)
    return "fp32 (OpenVINO's default on CPU)", False


def _tensorrt(options: dict, flags: set) -> tuple[str, bool | None]:
    reduced = [name for name in ("int8", "fp16", "bf16") if options.get(f"trt_{name}_enable", "").lower() in ON]
    if reduced:
        return f"{'/'.join(reduced)} allowed (trt_{reduced[0]}_enable)", True
    return "fp32 (TensorRT's default; trt_fp16_enable=1 allows fp16)", False


def _cuda(options: dict, flags: set) -> tuple[str, bool | None]:
    if options.get("use_tf32", "").lower() in ("0", "false"):
        return "fp32 (use_tf32=0)", False
    return "fp32 (on GPUs from Ampere on, MatMul and Conv may use TF32 unless use_tf32=0)", None


def _qnn(options: dict, flags: set) -> tuple[str, bool | None]:
    if options.get("enable_htp_fp16_precision", "1").lower() in ON and "htp" in options.get("backend_path", "htp").lower():
        return "fp16 on the HTP for float models (enable_htp_fp16_precision)", True
    return "fp32", False


RULES = {
    "OpenVINOExecutionProvider": _openvino,
    "TensorrtExecutionProvider": _tensorrt,
    "CUDAExecutionProvider": _cuda,
    "QNNExecutionProvider": _qnn,
}
