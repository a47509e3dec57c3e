"""export.early_copy: the weights an export surely keeps are copied while the passes run, and the
written model is the same whichever way its bytes arrived."""

from __future__ import annotations

import contextlib
import os
import threading

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxport.core.export.early_copy import EarlyCopy, surely_kept
from onnxport.core.export.export import export_model
from onnxport.core.export.options import ExportOptions
from onnxport.core.graph.prune import plan_prune
from onnxport.core.io.model_io import load_graph
from onnxport.core.io.parameter_set import FileSpan, ParamTensor
from onnxport.core.util.errors import Cancelled, CorruptFileError
from onnxport.core.util.progress import CancelToken, Reporter

D = 512  # 512 x 512 float32: 1 MiB, the smallest weight worth a head start


def _model(folder):
    """x -> MatMul(W) -> MatMul(Transpose(V)) -> + Gather(E, ids); W, V, E, bias in external data.
    V is read only by a Transpose folding computes (not surely kept); the others are."""
    rng = np.random.default_rng(0)
    weights = {name: rng.standard_normal((D, D), dtype=np.float32) for name in ("W", "V", "E")}
    weights["bias"] = rng.standard_normal(D, dtype=np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h1"], name="mm1"),
        helper.make_node("Transpose", ["V"], ["Vt"], name="tr"),
        helper.make_node("MatMul", ["h1", "Vt"], ["h2"], name="mm2"),
        helper.make_node("Gather", ["E", "ids"], ["emb"], name="gather", axis=0),
        helper.make_node("Add", ["h2", "emb"], ["h3"], name="add"),
        helper.make_node("Add", ["h3", "bias"], ["y"], name="add_bias"),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [1, D]), helper.make_tensor_value_info("ids", T.INT64, [1])],
        [helper.make_tensor_value_info("y", T.FLOAT, [1, D])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="model.data",
              size_threshold=1024)
    return path, weights


@contextlib.contextmanager
def layouts_seen():
    """The names each EarlyCopy started in the block was given, in order."""
    seen, original = [], EarlyCopy.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        seen.append(list(self.layout))

    EarlyCopy.__init__ = spy
    try:
        yield seen
    finally:
        EarlyCopy.__init__ = original


def _expected(weights, x, ids):
    return x @ weights["W"] @ weights["V"].T + weights["E"][ids] + weights["bias"]


def _run(path, x, ids):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x, "ids": ids})[0]


def test_surely_kept_names_the_weights_no_fold_can_drop(tmp_path):
    path, _ = _model(tmp_path)
    model = load_graph(path)
    plan = plan_prune(model, ["y"], set())
    names = [name for name, _ in surely_kept(model, plan, None, tmp_path)]
    # V feeds only a Transpose of constants (folded: V leaves the model); bias is under 1 MiB;
    # E feeds a Gather that folding could compute, but its indices come from a graph input
    assert names == ["W", "E"]
    in_memory = ParamTensor("W", T.FLOAT, (D, D), loader=lambda: np.zeros((D, D), np.float32))
    assert [n for n, _ in surely_kept(model, plan, {"W": in_memory}, tmp_path)] == ["E"]  # no bytes in a file
    in_a_file = ParamTensor("W", T.FLOAT, (D, D), loader=in_memory.loader, span=FileSpan(tmp_path / "ckpt", 64, D * D * 4))
    kept = surely_kept(model, plan, {"W": in_a_file}, tmp_path)
    assert kept[0] == ("W", in_a_file.span)  # a checkpoint's value, copied from the checkpoint
    assert surely_kept(model, plan_prune(model, ["h1"], set()), None, tmp_path)[0][0] == "W"


def test_export_with_an_early_copy_writes_the_same_model(tmp_path):
    path, weights = _model(tmp_path)
    early = tmp_path / "early.onnx"
    with layouts_seen() as seen:
        result = export_model(path, early, ["y"], options=ExportOptions(external_data="always"))
    assert seen == [["W", "E"]]  # the copy ran, with the surely kept weights
    x = np.random.default_rng(1).standard_normal((1, D), dtype=np.float32)
    ids = np.array([7], np.int64)
    np.testing.assert_allclose(_run(early, x, ids), _expected(weights, x, ids), rtol=1e-4, atol=1e-4)
    written = onnx.load(early)  # every initializer bit-exact (V as its folded transpose)
    values = {t.name: numpy_helper.to_array(t) for t in written.graph.initializer}
    for name in ("W", "E", "bias"):
        np.testing.assert_array_equal(values[name], weights[name])
    assert "V" not in values and any(np.array_equal(v, weights["V"].T) for v in values.values())
    model = onnx.load(early, load_external_data=False)
    offsets = [int({e.key: e.value for e in t.external_data}["offset"]) for t in model.graph.initializer
               if t.data_location == T.EXTERNAL]
    assert all(o % 4096 == 0 for o in offsets) and len(set(offsets)) == len(offsets)
    assert result.data_path.stat().st_size == max(offsets) + D * D * 4  # no hole, nothing left over
    assert sorted(os.listdir(tmp_path)) == sorted(["model.onnx", "model.data", "early.onnx", result.data_path.name])


def test_a_layout_the_writer_cannot_use_is_rewritten_from_the_start(tmp_path):
    """A tensor copied early that the written model lacks: the data file is emptied and rewritten."""
    from onnxport.core.export import export as export_module

    path, weights = _model(tmp_path)
    real = export_module.surely_kept

    def too_many(model, plan, params, folder, fold):  # plus a tensor the model does not have: all of model.data
        data = folder / "model.data"
        return [("ghost", FileSpan(data, 0, data.stat().st_size)), *real(model, plan, params, folder, fold)]

    class CopiedAtOnce(EarlyCopy):  # the whole early layout is on disk before the writer looks
        def __init__(self, *args):
            super().__init__(*args)
            self._thread.join()

    export_module.surely_kept, export_module.EarlyCopy = too_many, CopiedAtOnce
    try:
        result = export_model(path, tmp_path / "out.onnx", ["y"], options=ExportOptions(external_data="always"))
    finally:
        export_module.surely_kept, export_module.EarlyCopy = real, EarlyCopy
    written = {t.name: numpy_helper.to_array(t) for t in onnx.load(tmp_path / "out.onnx").graph.initializer}
    for name in ("W", "E", "bias"):
        np.testing.assert_array_equal(written[name], weights[name])
    model = onnx.load(tmp_path / "out.onnx", load_external_data=False)
    ends = [int(meta["offset"]) + int(meta["length"]) for meta in
            ({e.key: e.value for e in t.external_data} for t in model.graph.initializer if t.data_location == T.EXTERNAL)]
    assert result.data_path.stat().st_size == max(ends)  # the ghost's bytes were not left behind


def test_cancel_while_the_copy_runs_leaves_nothing(tmp_path):
    path, _ = _model(tmp_path)
    out = tmp_path / "out.onnx"
    out.write_bytes(b"precious")
    token = CancelToken()

    def progress(fraction, message):
        if message == "writing parameters":
            token.cancel()

    with pytest.raises(Cancelled):
        export_model(path, out, ["y"], options=ExportOptions(external_data="always"), progress=progress, cancel=token)
    assert out.read_bytes() == b"precious"
    assert sorted(os.listdir(tmp_path)) == ["model.data", "model.onnx", "out.onnx"]
    assert not [t for t in threading.enumerate() if t.name == "onnxport-early-copy"]


def test_a_source_shorter_than_its_span_is_an_error_on_the_writers_thread(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"\1" * 4096)
    fd = os.open(tmp_path / "dst.bin", os.O_RDWR | os.O_CREAT)
    copy = EarlyCopy(fd, tmp_path / "dst.bin", [("w", FileSpan(src, 0, 8192))])
    with pytest.raises(CorruptFileError, match="truncated"):
        copy.wait(Reporter(), 0, 8192)
    copy.close()
    copy.close()  # once is enough, twice is harmless


def test_checkpoint_values_are_copied_early_from_the_checkpoint(tmp_path):
    """An eval graph + ORT checkpoint (the training flow): the weights come from the checkpoint's
    bytes, copied while the passes run; with `fold=False` the Transpose'd weight is kept too."""
    from onnxport.core.io.readers import read_parameters
    from tests.support.checkpoint_writer import write_checkpoint

    from ..model_builders import eval_like_mlp, mlp_weights, reference_mlp

    weights = mlp_weights(d_in=1024, d_hidden=512)  # fc1.weight: 2 MiB
    write_checkpoint(tmp_path / "checkpoint", weights)
    model = eval_like_mlp(d_hidden=512)
    for vi in model.graph.input:
        if vi.name in ("input", "fc1.weight"):
            vi.type.tensor_type.shape.dim[1].dim_value = 1024
    onnx.save(model, tmp_path / "eval_model.onnx")
    params = read_parameters(tmp_path / "checkpoint")
    with layouts_seen() as seen:
        export_model(tmp_path / "eval_model.onnx", tmp_path / "out.onnx", ["logits"], params,
                     options=ExportOptions(external_data="always", fold=False))
    assert seen == [["fc1.weight"]]
    x = np.random.default_rng(2).standard_normal((2, 1024), dtype=np.float32)
    session = ort.InferenceSession(str(tmp_path / "out.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(["logits"], {"input": x})[0], reference_mlp(x, weights)[0], rtol=1e-5,
                               atol=1e-5)


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs a second file system (tmpfs at /dev/shm)")
def test_copy_range_across_file_systems_reads_and_writes(tmp_path):
    """copy_file_range refuses to cross file systems (EXDEV): the bytes are read and written."""
    import tempfile

    from onnxport.core.export.early_copy import copy_range

    data = np.random.default_rng(3).integers(0, 255, 10_000, dtype=np.uint8).tobytes()
    with tempfile.NamedTemporaryFile(dir="/dev/shm") as src_file:
        src_file.write(data)
        src_file.flush()
        src = os.open(src_file.name, os.O_RDONLY)
        dst = os.open(tmp_path / "dst", os.O_RDWR | os.O_CREAT)
        try:
            assert copy_range(src, dst, 4000, 100, 5000) == 4000  # at an offset
            os.write(dst, b"head")
            assert copy_range(src, dst, 3000, 7000) == 3000  # at the file position, which moves
        finally:
            os.close(src)
            os.close(dst)
    written = (tmp_path / "dst").read_bytes()
    assert written[5000:9000] == data[100:4100]
    assert written[:4] == b"head" and written[4:3004] == data[7000:]


def test_a_graph_refused_while_the_copy_runs_leaves_nothing(tmp_path):
    """The copy starts before the graph is checked (it only fills a temp file): a tensor made twice
    is still refused before anything is put in place, and the copy thread is gone."""
    path, _ = _model(tmp_path)
    model = load_graph(path)
    model.graph.node.append(helper.make_node("Identity", ["h1"], ["h2"], name="twice"))  # h2 made twice
    broken = tmp_path / "broken.onnx"
    onnx.save(model, broken)
    out = tmp_path / "out.onnx"
    out.write_bytes(b"precious")
    with layouts_seen() as seen, pytest.raises(CorruptFileError):
        export_model(broken, out, ["y"], options=ExportOptions(external_data="always"))
    assert seen and seen[0]  # the copy had started
    assert out.read_bytes() == b"precious"
    assert sorted(os.listdir(tmp_path)) == ["broken.onnx", "model.data", "model.onnx", "out.onnx"]
    assert not [t for t in threading.enumerate() if t.name == "onnxport-early-copy"]


def test_writeback_is_started_well_behind_the_copy(tmp_path, monkeypatch):
    """Writeback started right behind each chunk made the copy wait on a slow disk: it is started
    WRITEBACK_LAG_CHUNKS behind, and what is left is the final fsync's; the bytes are all there."""
    from onnxport.core.export import early_copy

    monkeypatch.setattr(early_copy, "CHUNK", 4096)
    monkeypatch.setattr(early_copy, "WRITEBACK_LAG_CHUNKS", 2)
    started = []
    monkeypatch.setattr(early_copy, "start_writeback", lambda fd, offset, count: started.append((offset, count)))
    src = tmp_path / "src.bin"
    data = bytes(range(256)) * 80  # 20,480 bytes: 5 chunks
    src.write_bytes(data)
    fd = os.open(tmp_path / "dst.bin", os.O_RDWR | os.O_CREAT)
    copy = EarlyCopy(fd, tmp_path / "dst.bin", [("w", FileSpan(src, 0, len(data)))])
    copy.wait(Reporter(), 0, len(data))
    copy.close()
    assert started == [(0, 4096), (4096, 4096), (8192, 4096)]  # the last 2 chunks: the fsync's
    assert (tmp_path / "dst.bin").read_bytes()[:len(data)] == data


def test_tensors_next_to_each_other_in_both_files_are_one_copy(tmp_path):
    from onnxport.core.export.early_copy import _runs

    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    layout = [(FileSpan(a, 0, 8192), 0), (FileSpan(a, 8192, 4096), 8192),  # follow on in both: one run
              (FileSpan(a, 16384, 4096), 12288),  # a gap in the source: a new run
              (FileSpan(b, 0, 4096), 16384)]  # another file: a new run
    assert _runs(layout) == [(a, 0, 0, 12288), (a, 16384, 12288, 4096), (b, 0, 16384, 4096)]
