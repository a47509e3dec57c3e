"""Execution providers by name: the short names the CLI takes, ORT's full names, how to get each.

`provider_names("cpu,openvino")` -> ["CPUExecutionProvider", "OpenVINOExecutionProvider"] (short or
full names, case-insensitive; an unknown one is one `OnnxportError` line listing the known ones).
`how_to_get(provider)` is the one line telling how to install the ONNX Runtime build that has it:
each build installs the `onnxruntime` package, so each lives in an environment of its own
(`make runtime-openvino` -> .venv-openvino, discovery.py). Light: imports nothing heavy.
"""

from __future__ import annotations

from onnxport.core.util.errors import OnnxportError

CPU = "CPUExecutionProvider"
SHORT = {
    "cpu": CPU,
    "openvino": "OpenVINOExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "dml": "DmlExecutionProvider",
    "qnn": "QNNExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
}
# provider -> (make target's environment name, the PyPI package that has it)
BUILDS = {
    "OpenVINOExecutionProvider": ("openvino", "onnxruntime-openvino"),
    "CUDAExecutionProvider": ("gpu", "onnxruntime-gpu"),
    "TensorrtExecutionProvider": ("gpu", "onnxruntime-gpu (with TensorRT's libraries)"),
    "DmlExecutionProvider": ("directml", "onnxruntime-directml (Windows)"),
    "QNNExecutionProvider": ("qnn", "onnxruntime-qnn (Windows on Snapdragon)"),
    "CoreMLExecutionProvider": (None, "onnxruntime (macOS)"),
}
ENV_VARIABLE = "ONNXPORT_RUNTIMES"


def full_name(name: str) -> str:
    """ORT's name of the provider called `name` (short or full); `OnnxportError` if unknown."""
    key = name.strip().lower()
    if key in SHORT:
        return SHORT[key]
    for full in SHORT.values():
        if key in (full.lower(), full.lower().removesuffix("executionprovider")):
            return full
    known = ", ".join(SHORT)
    raise OnnxportError(f"unknown execution provider {name.strip()!r}: use one of {known} (or ORT's full name)")


def provider_names(text: str) -> list[str]:
    """The providers of a comma-separated list, each once, in order; CPU first (the reference)."""
    names = [full_name(part) for part in text.split(",") if part.strip()]
    if not names:
        raise OnnxportError("--providers names no provider: use e.g. cpu,openvino")
    return list(dict.fromkeys([CPU, *names]))


def short_name(provider: str) -> str:
    return next((short for short, full in SHORT.items() if full == provider), provider)


def how_to_get(provider: str) -> str:
    """One line: how to install an ONNX Runtime build with `provider`."""
    target, package = BUILDS.get(provider, (None, "an onnxruntime build with it"))
    make = f"run `make runtime-{target}` (its environment: .venv-{target}), or " if target else ""
    return (f"{make}install {package} into a Python environment of its own and add its python to "
            f"{ENV_VARIABLE} (paths separated by ':')")
