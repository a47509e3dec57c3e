"""util/text: one-line messages keep their reason when they are cut (issue 27, item 11)."""

from __future__ import annotations

from onnxport.core.util.text import clipped, first_line


def test_a_long_line_loses_its_middle_never_its_reason():
    text = "Load model from " + "/folder" * 200 + "/m.onnx failed: Unsupported model IR version: 99"
    cut = clipped(text, 300)
    assert len(cut) <= 300 and cut.startswith("Load model from /folder") and " ... " in cut
    assert cut.endswith("/m.onnx failed: Unsupported model IR version: 99")
    assert clipped("short", 300) == "short"


def test_first_line_is_clipped_the_same_way():
    exc = RuntimeError("x" * 1000 + " index is out of bounds\nsecond line")
    line = first_line(exc, 200)
    assert len(line) <= 200 and line.endswith("index is out of bounds")
    assert first_line(ValueError()) == "ValueError"
