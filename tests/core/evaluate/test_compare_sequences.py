"""Validate compares sequence outputs item by item (SplitToSequence in ONNX's backend tests ended
in "ValueError: setting an array element with a sequence", a traceback; issue 26, item 11)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.cli import main
from onnxport.core.evaluate.compare import OutputStats


def split_model(split: list[int]) -> onnx.ModelProto:
    seq = helper.make_tensor_sequence_value_info("seq", T.FLOAT, None)
    graph = helper.make_graph([helper.make_node("SplitToSequence", ["x", "split"], ["seq"], name="split", axis=0)],
                              "g", [helper.make_tensor_value_info("x", T.FLOAT, [3, 6])], [seq],
                              [numpy_helper.from_array(np.array(split, np.int64), "split")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_validate_compares_sequences_of_unequal_items(tmp_path, capsys):
    onnx.save(split_model([1, 2]), str(tmp_path / "ref.onnx"))
    onnx.save(split_model([2, 1]), str(tmp_path / "other.onnx"))
    np.savez(tmp_path / "x.npz", x=np.arange(18, dtype=np.float32).reshape(3, 6))
    args = ["--reference", str(tmp_path / "ref.onnx"), "--inputs", str(tmp_path / "x.npz"), "-q"]
    assert main(["validate", str(tmp_path / "ref.onnx"), *args]) == 0
    assert "PASSED" in capsys.readouterr().out
    assert main(["validate", str(tmp_path / "other.onnx"), *args]) == 1  # [2, 6], [1, 6] vs [1, 6], [2, 6]
    assert "FAILED" in capsys.readouterr().out


def test_sequence_lengths_and_empty_optionals_are_shape_errors():
    stats = OutputStats("seq")
    stats.update([np.zeros(2)], [np.zeros(2), np.zeros(1)])
    assert stats.shape_error == "1 items != reference 2 items"
    optional = OutputStats("opt")
    optional.update(None, np.zeros(2))
    assert optional.shape_error == "none != reference a tensor [2]"


def test_validate_of_a_sequence_input_says_it_feeds_tensors_only(tmp_path, capsys):
    graph = helper.make_graph([helper.make_node("SequenceLength", ["seq"], ["n"], name="length")], "g",
                              [helper.make_tensor_sequence_value_info("seq", T.FLOAT, None)],
                              [helper.make_tensor_value_info("n", T.INT64, [])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    assert main(["validate", str(tmp_path / "m.onnx"), "--reference", str(tmp_path / "m.onnx"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "input(s) seq (seq(tensor(float))) are not tensors" in err and "does not take" not in err, err
