"""What to try, in the app's words. A core error's hint is written for the CLI ("give --calibration
DATA"); when it names the option it is about (`OnnxportError.option`) and the app has a field for
that choice, the app says the field instead: the policy stays in core, the words are the app's.
"""

from __future__ import annotations

from onnxport.core.util.errors import OnnxportError

APP_HINTS = {
    "--calibration": "choose Calibration data in Export's quantization options (inputs like the real ones), "
                     'or tick "random inputs" there to calibrate on generated inputs anyway',
    "--mode": 'choose "Static int8 (QDQ, calibrated)" under Quantize in Export for Conv layers',
    "--validation-inputs": "choose Validation inputs in Export's quantization options (inputs the float model "
                           "computes finite outputs for); NaN/Inf on every input points at its weights",
}


def app_hint(exc: OnnxportError) -> str | None:
    """`exc`'s hint as the app says it (the CLI's when the app has no words of its own for it)."""
    return APP_HINTS.get(getattr(exc, "option", None) or "", exc.hint) if exc.hint else None


def app_one_line(exc: OnnxportError) -> str:
    """`exc.one_line()` with the app's hint."""
    text = str(exc).strip().replace("\n", " ")
    hint = app_hint(exc)
    return f"{text} ({hint})" if hint else text
