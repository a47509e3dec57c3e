"""The report chart's x labels in little room: the full name when it fits, else a short form.

`short_label("dynamic") == "int8"`, `"float32" -> "fp32"`, a file name loses its `.onnx`; other
names have no short form (themselves). `fitted_label(label, metrics, room)` is the text drawn:
the full label if it fits `room` px, else the short form if it fits, else the short form elided
in the middle (both ends of a name say something). The full name is the bar's tooltip.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetricsF

SHORT_FORMS = {"float32": "fp32", "float16": "fp16", "fp16": "fp16", "dynamic": "int8", "static": "int8",
               "int4": "int4", "bfloat16": "bf16", "float64": "fp64"}
LABEL_PAD = 6.0  # px between neighbouring labels


def short_label(label: str) -> str:
    """The short form of a precision or mode (`dynamic` -> `int8`), a file name without `.onnx`."""
    if label in SHORT_FORMS:
        return SHORT_FORMS[label]
    if label.lower().endswith(".onnx") and len(label) > 5:
        return label[:-5]
    return label


def fitted_label(label: str, metrics: QFontMetricsF, room: float) -> str:
    room = max(room, 8.0)
    for text in (label, short_label(label)):
        if metrics.horizontalAdvance(text) <= room:
            return text
    return metrics.elidedText(short_label(label), Qt.TextElideMode.ElideMiddle, room)


def short_label_width(labels: list[str], metrics: QFontMetricsF, cap: float = 60.0) -> float:
    """The room one bar's slot needs for its short label (at most `cap`: a long file name is elided)."""
    return max((min(metrics.horizontalAdvance(short_label(t)), cap) for t in labels), default=0.0) + LABEL_PAD
