"""Mid tensors of real models that shape inference leaves without a rank export to models that
`onnx.checker` accepts (issue 26, item 9): PP-OCR's recogniser `p2o.MatMul.1` (a Reshape to a
computed shape), silero_vad's `If` outputs."""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.cli import main

from .corpus import ocr_recognizer, silero_vad


@pytest.mark.parametrize(("model", "output"), [(ocr_recognizer, "p2o.MatMul.1"),
                                               (silero_vad, "If_0_outputs_0"), (silero_vad, "If_0_outputs_1")],
                         ids=["ocr-rec-matmul", "silero-if-0", "silero-if-1"])
def test_a_rankless_mid_tensor_exports_a_valid_model(tmp_path, capsys, model, output):
    out = tmp_path / "out.onnx"
    assert main(["export", str(model()), "--outputs", output, "-o", str(out)]) == 0, capsys.readouterr().err
    written = onnx.load(str(out))
    onnx.checker.check_model(written, full_check=True)
    assert written.graph.output[0].type.tensor_type.HasField("shape")
