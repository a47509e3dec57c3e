"""Names read from a file never reach the terminal raw (issue 27, item 10): ESC sequences, BEL,
newlines, C1 controls and bidi overrides in tensor and node names are printed escaped
(util/text.shown) by `inspect --all`, export's "wrote" line and error lines."""

from __future__ import annotations

import tempfile
from pathlib import Path

import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnxport.core.cli import main
from onnxport.core.util.text import shown

from ..fuzz_names_functions import NAMES, renamed
from ..fuzz_seeds import fuzz_settings, onnx_model

EVIL_OUT = "out\x1b[2J\x1b]0;pwned\x07\n\u202eevil\x9b31m"
EVIL_MID = "mid\r\x7f\u2066x\u2069\u2028"
EVIL_NODE = "/enc\x1b[31m/Relu"


def raw_controls(text: str) -> list[str]:
    """Characters a terminal would act on (every non-printable one but the line breaks we print)."""
    return sorted({repr(c) for c in text if not c.isprintable() and c != "\n"})


@pytest.fixture
def evil_model(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], [EVIL_MID], name=EVIL_NODE),
             helper.make_node("Neg", [EVIL_MID], [EVIL_OUT], name="/enc/Neg\u202e")]
    graph = helper.make_graph(nodes, "g\x1b[5m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info(EVIL_OUT, TensorProto.FLOAT, [2])])
    path = tmp_path / "evil.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def test_inspect_all_prints_names_escaped(evil_model, capsys):
    assert main(["inspect", str(evil_model), "--all"]) == 0
    out, err = capsys.readouterr()
    assert raw_controls(out + err) == []
    assert shown(EVIL_OUT) in out and shown(EVIL_MID) in out
    assert "out\\x1b[2J\\x1b]0;pwned\\x07\\n\\u202eevil\\x9b31m" in out and "enc\\x1b[31m" in out


def test_export_wrote_line_and_errors_print_names_escaped(evil_model, tmp_path, capsys):
    out_path = tmp_path / "out.onnx"
    assert main(["export", str(evil_model), "--outputs", EVIL_OUT, "-o", str(out_path)]) == 0
    out, err = capsys.readouterr()
    assert raw_controls(out + err) == [] and f"outputs {shown(EVIL_OUT)}," in out
    assert main(["export", str(evil_model), "--outputs", "nope\x1b[2J\u202e", "-o", str(tmp_path / "b.onnx")]) == 2
    out, err = capsys.readouterr()
    assert raw_controls(out + err) == [] and "nope\\x1b[2J\\u202e" in err and err.count("\n") == 1


def test_shown_escapes_what_a_terminal_acts_on_and_keeps_the_rest():
    assert shown("plain /a/b.0 é 中 ✓ x") == "plain /a/b.0 é 中 ✓ x"
    assert shown("a\x1b[0m\x07\n\r\t\x00\x7f\x85\x9b") == "a\\x1b[0m\\x07\\n\\r\\t\\x00\\x7f\\x85\\x9b"
    assert shown("\u202e\u200f\u2066\u2028\ufeff\udc80\U000e0001") == "\\u202e\\u200f\\u2066\\u2028\\ufeff\\udc80\\U000e0001"


@fuzz_settings(60)
@given(names=st.lists(NAMES, min_size=1, max_size=3))
def test_any_name_is_printed_escaped_by_inspect_all(names, capsys):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.onnx"
        model = renamed(onnx_model(), names)
        onnx.save(model, path)
        capsys.readouterr()
        assert main(["inspect", str(path), "--all"]) == 0
    out, err = capsys.readouterr()
    assert raw_controls(out + err) == []
    for node in model.graph.node:
        assert all(shown(name) in out for name in node.output)


@given(text=st.text())
def test_shown_is_always_printable_and_only_escapes(text):
    escaped = shown(text)
    assert escaped.isprintable() or escaped == ""
    assert escaped == text or not text.isprintable()
