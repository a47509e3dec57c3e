"""A dropped folder of thousands of files (issue 36, item 5: 100,000 froze the window): it is listed
off the caller's thread with progress and cancel checks, every unused file counted; a cancel
during the listing ends it at the next check; pipes and devices are never opened."""

from __future__ import annotations

import os

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxport.core.util.errors import Cancelled
from onnxport.core.util.progress import CancelToken, Reporter
from onnxport.core.workflow.sources import LISTING_REPORT_EVERY, classify_sources, open_sources

FILES = 3 * LISTING_REPORT_EVERY + 5


@pytest.fixture(scope="module")
def crowded(tmp_path_factory):
    """A model among FILES text files, a FIFO and a subfolder of no known kind."""
    folder = tmp_path_factory.mktemp("crowded")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / "model.onnx")
    for i in range(FILES):
        (folder / f"note{i:05d}.txt").write_text("x")
    os.mkfifo(folder / "pipe.onnx")  # opening it would wait for a writer, for good
    (folder / "plain").mkdir()
    return folder


def test_every_unused_file_is_counted_with_progress(crowded):
    said = []
    found = classify_sources([crowded], Reporter(lambda fraction, message: said.append(message)))
    assert found.model == crowded / "model.onnx" and found.params == []
    assert len(found.others) == FILES and found.others[0][0].name == "note00000.txt"
    assert any(m.startswith(f"listing {crowded.name}: ") for m in said)
    assert f"looking at {crowded.name}: {3 * LISTING_REPORT_EVERY:,} of {FILES + 1:,} files" in said


@pytest.mark.parametrize("after", ["listing", "looking at"])
def test_a_cancel_during_the_listing_ends_it(crowded, after):
    token = CancelToken()

    def progress(fraction, message) -> None:
        if message.startswith(after):
            token.cancel()  # the user pressed Cancel while the folder was listed

    with pytest.raises(Cancelled):
        open_sources([crowded], progress, token)
