"""What each deploy target reads: `parse_target("ort-1.17")`, `parse_target("ort-mobile")`.

An ONNX Runtime release reads models up to an ai.onnx opset, an ai.onnx.ml opset and an IR
version. Rows 1.14-1.18: ONNX Runtime's compatibility table ("ONNX opset support",
https://onnxruntime.ai/docs/reference/compatibility.html, docs/reference/compatibility.md of the
gh-pages branch); 1.19-1.22 follow the ONNX release each ships (onnx.helper.VERSION_TABLE), the
ml opset kept at the table's last value. A release not in the table is refused in one line
listing the known ones. ORT Mobile is the installed onnxruntime's ORT format: the `.ort` file
plus the operator config of a reduced build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from onnxport.core.util.errors import OnnxportError

MOBILE = "ort-mobile"

# ORT release -> (ONNX release it ships, max ai.onnx opset, max ai.onnx.ml opset, max IR version);
# 1.15 reads IR 8 by the table although its ONNX 1.14 defines IR 9
ORT_RELEASES: dict[tuple[int, int], tuple[str, int, int, int]] = {
    (1, 14): ("1.13", 18, 3, 8),
    (1, 15): ("1.14", 19, 3, 8),
    (1, 16): ("1.14.1", 19, 3, 9),
    (1, 17): ("1.15", 20, 4, 9),
    (1, 18): ("1.16", 21, 4, 10),
    (1, 19): ("1.16.1", 21, 4, 10),
    (1, 20): ("1.16.1", 21, 4, 10),
    (1, 21): ("1.17", 22, 4, 10),
    (1, 22): ("1.18", 22, 4, 11),
}
_RUNTIME = re.compile(r"ort-(\d+)\.(\d+)(?:\.\d+)?")


@dataclass(frozen=True)
class Target:
    """One deploy target; `max_opset`/`max_ml_opset`/`max_ir` are None for ORT Mobile (no conversion)."""

    name: str
    mobile: bool = False
    max_opset: int | None = None
    max_ml_opset: int | None = None
    max_ir: int | None = None

    @property
    def suffix(self) -> str:
        return ".ort" if self.mobile else ".onnx"

    def needs(self) -> str:
        """What the target needs, in words (the app's Deploy dialog and the report say it)."""
        if self.mobile:
            return ("ORT Mobile: the model in ORT format (.ort, optimized as ONNX Runtime's own "
                    "convert_onnx_models_to_ort writes it) and the operators and types it uses "
                    "(required_operators_and_types.config) for a reduced build; ORT's verdict on NNAPI "
                    f"and CoreML partitions comes with it. The .ort file is read by ONNX Runtime {_installed()} "
                    "(which writes it) and later releases.")
        return (f"ONNX Runtime {self.name[4:]}: reads ai.onnx opset <= {self.max_opset}, ai.onnx.ml "
                f"<= {self.max_ml_opset} and IR version <= {self.max_ir}; a newer model is converted down "
                "(onnx.version_converter, IR rewritten), or refused naming the op that cannot be expressed.")


def _installed() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return ".".join(version("onnxruntime").split(".")[:2])
    except PackageNotFoundError:
        return "(installed)"


def deployed_name(stem: str, target: str) -> str:
    """The file a deploy of `<stem>.onnx` writes by default: `<stem>.ort` for ORT Mobile,
    `<stem>.ort-1.17.onnx` for a release (never the model's own name)."""
    return f"{stem}.ort" if target == MOBILE else f"{stem}.{target}.onnx"


def known_targets() -> list[str]:
    return [MOBILE] + [f"ort-{a}.{b}" for a, b in ORT_RELEASES]


def parse_target(text: str) -> Target:
    """`ort-mobile` or `ort-X.Y` (a patch number is ignored); one-line `OnnxportError` otherwise."""
    name = text.strip().lower()
    if name == MOBILE:
        return Target(MOBILE, mobile=True)
    match = _RUNTIME.fullmatch(name)
    if match is not None:
        key = (int(match.group(1)), int(match.group(2)))
        if key in ORT_RELEASES:
            _onnx, opset, ml, ir = ORT_RELEASES[key]
            return Target(f"ort-{key[0]}.{key[1]}", max_opset=opset, max_ml_opset=ml, max_ir=ir)
    raise OnnxportError(f"unknown deploy target '{text}': one of {', '.join(known_targets())}")
