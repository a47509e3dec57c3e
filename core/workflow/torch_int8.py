"""The int8 model a PyTorch import writes beside its export: the accuracy-target quantizer.

Contract: `int8_beside(export_path, target, progress, cancel, validation_inputs=, tokenizer=)` quantizes the
exported float32 model (dynamic int8, `<stem>.int8.onnx`) through `quantize.quantize`, the same
quantizer and accuracy target (default 0.99 cosine per output, nodes kept in float until met)
`onnxport quantize` and `export --quantize` use (validated on `validation_inputs`, e.g. a .txt of
sentences for `tokenizer`'s folder, else generated ones), and returns its result with the
validation against the float model. `target=None` quantizes everything asked and reports the validation
(`onnxport quantize --no-target`). A miss (or nothing gained) writes no int8 model and raises one
line that says the float model was written.
"""

from __future__ import annotations

from pathlib import Path

from onnxport.core.quantize.quantize import QuantizeOptions, quantize
from onnxport.core.quantize.result import QuantizeResult
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken, ProgressFn
from onnxport.core.workflow.companion_names import quantized_path

DEFAULT_TARGET = 0.99


def int8_beside(export_path: str | Path, target: float | None = DEFAULT_TARGET, progress: ProgressFn | None = None,
                cancel: CancelToken | None = None, *, validation_inputs: str | Path | None = None,
                tokenizer: str | Path | None = None) -> QuantizeResult:
    export_path = Path(export_path)
    try:
        options = QuantizeOptions(accuracy_target=target, validation_inputs=validation_inputs, tokenizer=tokenizer)
        return quantize(export_path, quantized_path(export_path, "dynamic"), "dynamic", options,
                        progress=progress, cancel=cancel)
    except Cancelled:
        raise Cancelled(f"cancelled while quantizing; {export_path} (float32) was written, no int8 model") from None
    except OnnxportError as exc:
        raise OnnxportError(f"wrote {export_path} (float32), but no int8 model: {exc.one_line()}") from None
