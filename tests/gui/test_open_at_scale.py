"""Opening a big graph in the window: the tree comes before its shapes (inferred in a child,
filled in a side job, then shown), and a newer model's open stops the older one's inference.
'Big' is lowered to any size here: the thresholds are the only thing patched."""

from __future__ import annotations

import onnx
import pytest

from onnxport.core.graph import index as index_module
from onnxport.core.workflow import sources as sources_module

from .test_main_window import open_example

pytestmark = pytest.mark.gui


@pytest.fixture
def big(monkeypatch):
    monkeypatch.setattr(index_module, "OUT_OF_PROCESS_NODES", 1)
    monkeypatch.setattr(sources_module, "EARLY_TYPES_BYTES", 0)


def test_shapes_arrive_after_the_tree(qtbot, window, example, big):
    open_example(qtbot, window, example)
    index = window.session.index
    relu = window.model.index_of("/Relu_output_0")
    assert relu.isValid()
    window.tree.setCurrentIndex(relu)
    qtbot.waitUntil(lambda: index.pending_types is None and not window.runner.side_jobs, timeout=300_000)
    assert index["/Relu_output_0"].shape is not None and index["/Relu_output_0"].dtype == "float32"
    shape_text = index["/Relu_output_0"].shape_text
    assert window.model.data(relu.siblingAtColumn(1)) == shape_text  # the tree shows it
    assert shape_text in window.details_panel.text()


def test_a_newer_open_cancels_the_older_models_inference(qtbot, window, example, tmp_path, big, monkeypatch):
    from onnxport.core.graph import shape_types

    monkeypatch.setattr(shape_types, "TARGET", "tests.core.util.child_functions:never_answers")  # inference that never ends
    started = []
    real_start = shape_types.TypeInference.start.__func__
    monkeypatch.setattr(shape_types.TypeInference, "start",
                        classmethod(lambda cls, p: started.append(real_start(cls, p)) or started[-1]))
    open_example(qtbot, window, example)
    assert len(started) == 1 and started[0]._proc is not None  # the child still "infers"
    types_job = next(job for job in window.runner.side_jobs if job.name == "types")
    monkeypatch.undo()  # the next model opens normally (small: no child at all)
    model = onnx.load(example[0])
    onnx.save(model, tmp_path / "plain.onnx")
    open_example(qtbot, window, [tmp_path / "plain.onnx"])
    assert types_job.cancel_requested
    qtbot.waitUntil(lambda: types_job not in window.runner.side_jobs, timeout=300_000)  # the child was killed
    assert started[0]._proc is None
