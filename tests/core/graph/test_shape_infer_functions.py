"""Shape inference sizes its work by the graph with local functions inlined (issue 27, item 4): a
30-node file whose calls expand to ~24,000 nodes is inferred in a child, off the app's GIL."""

from __future__ import annotations

from onnxport.core.graph import shape_infer
from onnxport.core.io.model_functions import expanded_nodes

from ..io.test_function_expansion import doubling_chain


def test_an_expanding_graph_is_inferred_in_a_child(monkeypatch):
    model = doubling_chain(14)  # 28 stored nodes
    assert len(model.graph.node) + sum(len(f.node) for f in model.functions) < 30
    assert expanded_nodes(model) > shape_infer.OUT_OF_PROCESS_NODES
    children = []
    real = shape_infer._in_child
    monkeypatch.setattr(shape_infer, "_in_child", lambda *a, **k: children.append(1) or real(*a, **k))
    found = {vi.name: vi for vi in shape_infer.inferred_value_infos(model)}
    assert children == [1]
    assert [d.dim_value for d in found["y"].type.tensor_type.shape.dim] == [2]


def test_a_small_graph_stays_in_process(monkeypatch):
    monkeypatch.setattr(shape_infer, "_in_child", lambda *a, **k: (_ for _ in ()).throw(AssertionError("child")))
    found = {vi.name: vi for vi in shape_infer.inferred_value_infos(doubling_chain(4))}
    assert [d.dim_value for d in found["y"].type.tensor_type.shape.dim] == [2]


def test_cancel_stops_inference_in_its_child(monkeypatch, tmp_path):
    """Inference in a child can be cancelled (issue 27, item 4): the child is killed and the
    caller sees `Cancelled`, not the 600 s timeout or an empty answer. The child marks its start
    (the cancel comes then) and would mark its end after a minute: killed, it never does."""
    import threading
    import time

    import pytest

    from onnxport.core.util.errors import Cancelled
    from onnxport.core.util.progress import CancelToken

    mark = tmp_path / "child"
    monkeypatch.setenv("ONNXPORT_TEST_CHILD_MARK", str(mark))
    monkeypatch.setattr(shape_infer, "TARGET", "tests.core.util.child_functions:sleep_a_minute_marked")
    token = CancelToken()

    def cancel_once_running() -> None:
        give_up = time.monotonic() + 120  # a bound against a hang, not a measurement
        while not mark.exists() and time.monotonic() < give_up:
            time.sleep(0.01)
        token.cancel()

    threading.Thread(target=cancel_once_running, daemon=True).start()
    with pytest.raises(Cancelled):
        shape_infer.inferred_value_infos(doubling_chain(14), cancel=token)
    pid = int(mark.read_text().split()[0])
    give_up = time.monotonic() + 120
    while _running(pid) and time.monotonic() < give_up:  # gone at once if killed; in a minute if not
        time.sleep(0.01)
    assert mark.read_text() == str(pid), "the child was not killed: it ran to its end"


def _running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
