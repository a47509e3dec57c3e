"""Graph preview latency at 300, 3k, 30k and 100k nodes: from a selection to Netron having drawn.

    python -m bench preview_bench            (PREVIEW_BENCH_SIZES=300,3k,30k,100k picks sizes)

The models:
- 300: an eval graph like ORT training's (BERT-like encoder, 8 layers, hidden 512, FFN 2048, Erf
  GELU, Dropout, a classification head with SoftmaxCrossEntropyLoss on `labels`), ~100 MB of
  weights in an external data file, 297 nodes: drawn whole, as always;
- 3k and 30k: Llama-like decoders (bench/decoder_model.py, small weights in per-layer external
  files, heads written out op by op: 15 layers x 4 heads = 3,067 nodes, 21 layers x 32 heads =
  30,157 nodes);
- 100k: bench/scale_models.py's decoder-like graph (97,569 nodes, tiny inline weights).
A graph Netron would draw more than 300 nodes of is drawn focused on 240 (core/graph/focus.py).
The real PreviewPanel (offscreen WebEngine, loopback server, Netron's page) is given the model's
session (as the main window does; opened afresh each round, so each round builds the selections'
export graphs) and timed to its `rendered` signal
(debounce included), for: the outputs checked (`logits`: the whole model's cone, the first
preview of that model), an early layer checked (early exit), a tensor selected in the tree that
the focused view collapsed (it becomes the focus), and "Show more" (twice the budget); the 300
case times the Pruned/Original toggle instead of the last two. Each count Netron drew is checked
against the model published (Netron draws a Constant with one reader inside that reader).
Best of two rounds over the sizes. Also measured: the worst GUI-thread stall while previewing (a
10 ms QTimer heartbeat) with the longest pass of Python's cyclic collector in the same span (it
holds the GIL: the bench holds all four models, so its passes are longer than the app's), and, as
the in-run reference, `onnx.load` of each file with its weights.
Bar: every preview of a selection <= 1.5 s at 300, 3k and 30k nodes (100k, and "Show more", which
draws twice as many nodes on request, are shown, not held to it).
Writes build/bench/preview_bench.json; exit 1 if the bar is missed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
if hasattr(os, "geteuid") and os.geteuid() == 0:
    os.environ.setdefault("QTWEBENGINE_CHROMIUM_FLAGS", "--no-sandbox")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "build" / "bench"
BAR_S = 1.5
LAYERS, HIDDEN, FFN, HEADS, VOCAB, CLASSES = 8, 512, 2048, 8, 8192, 4
ROUNDS = 2
SIZES = ("300", "3k", "30k", "100k")
BARRED = ("300", "3k", "30k")
UNBARRED = ("show more",)  # twice the budget, asked for: shown, not held to the bar


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(0)

    def weight(self, name: str, *shape: int) -> str:
        self.inits.append(numpy_helper.from_array((self.rng.standard_normal(shape) * 0.02).astype(np.float32), name))
        return name

    def const(self, name: str, values, dtype=np.int64) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(values, dtype=dtype), name))
        return name

    def op(self, op: str, inputs: list[str], scope: str, **attrs) -> str:
        name = f"{scope}/{op}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [f"{name}_output_0"], name=name, **attrs))
        return f"{name}_output_0"

    def linear(self, x: str, scope: str, d_in: int, d_out: int) -> str:
        w = self.weight(f"{scope}.weight", d_in, d_out)
        b = self.weight(f"{scope}.bias", d_out)
        return self.op("Add", [self.op("MatMul", [x, w], scope), b], scope)

    def layer_norm(self, x: str, scope: str) -> str:
        g, b = self.weight(f"{scope}.weight", HIDDEN), self.weight(f"{scope}.bias", HIDDEN)
        return self.op("LayerNormalization", [x, g, b], scope, axis=-1, epsilon=1e-12)

    def dropout(self, x: str, scope: str) -> str:
        return self.op("Dropout", [x, "dropout_ratio", "training_mode"], scope)


def bert_eval_model(folder: Path) -> Path:
    """The bench's eval model (with a loss head) and its ~100 MB external data file."""
    g = _Graph()
    g.const("dropout_ratio", 0.1, np.float32)
    g.const("training_mode", True, np.bool_)
    heads_shape = g.const("heads_shape", [0, 0, HEADS, HIDDEN // HEADS])
    merge_shape = g.const("merge_shape", [0, 0, HIDDEN])
    scale = g.const("scale", np.sqrt(HIDDEN // HEADS), np.float32)
    sqrt2, one, half = g.const("sqrt2", np.sqrt(2.0), np.float32), g.const("one", 1.0, np.float32), g.const(
        "half", 0.5, np.float32)
    x = g.op("Gather", [g.weight("embeddings.word.weight", VOCAB, HIDDEN), "input_ids"], "/embeddings")
    x = g.dropout(g.layer_norm(x, "/embeddings/LayerNorm"), "/embeddings")
    for i in range(LAYERS):
        s = f"/encoder/layer.{i}"
        qkv = [g.op("Transpose", [g.op("Reshape", [g.linear(x, f"{s}/attention/{n}", HIDDEN, HIDDEN), heads_shape],
                                        f"{s}/attention/{n}")], f"{s}/attention/{n}", perm=perm)
               for n, perm in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3]))]
        scores = g.op("Div", [g.op("MatMul", qkv[:2], f"{s}/attention"), scale], f"{s}/attention")
        probs = g.dropout(g.op("Softmax", [scores], f"{s}/attention", axis=-1), f"{s}/attention")
        ctx = g.op("Transpose", [g.op("MatMul", [probs, qkv[2]], f"{s}/attention")], f"{s}/attention", perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merge_shape], f"{s}/attention")
        attn = g.dropout(g.linear(ctx, f"{s}/attention/output", HIDDEN, HIDDEN), f"{s}/attention/output")
        x = g.layer_norm(g.op("Add", [attn, x], f"{s}/attention/output"), f"{s}/attention/output/LayerNorm")
        h = g.linear(x, f"{s}/intermediate", HIDDEN, FFN)
        erf = g.op("Erf", [g.op("Div", [h, sqrt2], f"{s}/intermediate")], f"{s}/intermediate")
        h = g.op("Mul", [g.op("Mul", [h, g.op("Add", [erf, one], f"{s}/intermediate")], f"{s}/intermediate"), half],
                 f"{s}/intermediate")
        out = g.dropout(g.linear(h, f"{s}/output", FFN, HIDDEN), f"{s}/output")
        x = g.layer_norm(g.op("Add", [out, x], f"{s}/output"), f"{s}/output/LayerNorm")
        g.nodes[-1].output[0] = f"layer{i}"
        x = f"layer{i}"
    first = g.op("Gather", [x, g.const("zero", 0)], "/pooler", axis=1)
    pooled = g.op("Tanh", [g.linear(first, "/pooler/dense", HIDDEN, HIDDEN)], "/pooler")
    g.nodes.append(helper.make_node("Gemm", [pooled, g.weight("classifier.weight", CLASSES, HIDDEN),
                                             g.weight("classifier.bias", CLASSES)], ["logits"],
                                    name="/classifier/Gemm", transB=1))
    g.nodes.append(helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"],
                                    name="/loss/SoftmaxCrossEntropyLoss", reduction="mean"))
    graph = helper.make_graph(
        g.nodes, "bert_eval", [helper.make_tensor_value_info("input_ids", T.INT64, ["batch", "seq"]),
                               helper.make_tensor_value_info("labels", T.INT64, ["batch"])],
        [helper.make_tensor_value_info("loss", T.FLOAT, []),
         helper.make_tensor_value_info("logits", T.FLOAT, ["batch", CLASSES])], initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / "eval_model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="eval_model.onnx.data", size_threshold=1024)
    return path


def _wait(app, predicate, timeout: float = 60) -> None:
    end = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > end:
            raise TimeoutError("Netron did not draw in time")
        app.processEvents()
        time.sleep(0.002)


def _models(folder: Path, sizes) -> dict[str, dict]:
    """size -> {path, outputs (whole, early layer), tensor (inside a collapsed layer)}."""
    from bench.decoder_model import DecoderConfig, write_decoder
    from bench.scale_models import transformer_model

    models: dict[str, dict] = {}
    if "300" in sizes:
        (folder / "bert").mkdir()
        models["300"] = {"path": bert_eval_model(folder / "bert"), "outputs": ["logits"], "layer": ["layer1"]}
    for size, config in (("3k", DecoderConfig(layers=15, hidden=256, heads=4, ffn=512, vocab=1000)),
                         ("30k", DecoderConfig(layers=21, hidden=256, heads=32, ffn=512, vocab=1000))):
        if size in sizes:
            files = write_decoder(folder / size, config)
            middle = config.layers // 2
            models[size] = {"path": files.model, "outputs": ["logits"], "layer": [files.layer_outputs[1]],
                            "tensor": f"/model/layers.{middle}/mlp/Mul_output_0"}
    if "100k" in sizes:
        path = folder / "scale100k.onnx"
        transformer_model(path, 100_000)
        models["100k"] = {"path": path, "outputs": ["logits"], "layer": ["/model/layers.1/Identity_out_output_0"],
                          "tensor": "/model/layers.1200/mlp/Mul_output_0"}
    return models


def netron_count(data: bytes) -> int:
    """Nodes Netron draws for a published model: a Constant read by one node is drawn inside it."""
    model = onnx.load_from_string(data)
    readers: dict[str, int] = {}
    for node in model.graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    inlined = sum(1 for n in model.graph.node if n.op_type == "Constant" and readers.get(n.output[0], 0) == 1)
    return len(model.graph.node) - inlined


class _CollectorPauses:
    """The longest pass of Python's cyclic collector (any thread; it holds the GIL, so the GUI
    thread waits too): tells a stall caused by the collector from one caused by the preview."""

    def __init__(self) -> None:
        import gc

        self.longest = 0.0
        self._started = 0.0
        gc.callbacks.append(self._seen)

    def _seen(self, phase: str, _info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.longest = max(self.longest, time.perf_counter() - self._started)


def _spare_none_references() -> None:
    """PySide6 6.12 on Python 3.11 drops one reference to None for every Qt slot or runJavaScript
    callback that returns None (measured here: 200 callbacks, 200 references fewer); a long run of
    polls and heartbeats brings None's count to zero and the process aborts ('none_dealloc').
    Python 3.12 makes None immortal; on 3.11 this entry point gives None references to spare."""
    if sys.version_info < (3, 12):
        import ctypes

        ctypes.c_ssize_t.from_address(id(None)).value += 1 << 40


def main() -> int:
    _spare_none_references()
    from PySide6.QtCore import QCoreApplication, Qt
    from PySide6.QtWidgets import QApplication

    QCoreApplication.setAttribute(Qt.AA_ShareOpenGLContexts)
    import PySide6.QtWebEngineWidgets  # noqa: F401 - before the QApplication

    from bench.gui_bench import Heartbeat
    from onnxport.core.workflow.sources import open_session
    from onnxport.gui.preview.preview_panel import PreviewPanel

    sizes = [s for s in os.environ.get("PREVIEW_BENCH_SIZES", ",".join(SIZES)).split(",") if s in SIZES]
    app = QApplication.instance() or QApplication([])
    OUT.mkdir(parents=True, exist_ok=True)
    results: dict = {"sizes": {}}
    with tempfile.TemporaryDirectory(dir=OUT, prefix="preview-") as tmp:
        models = _models(Path(tmp), sizes)
        for size, m in models.items():
            t0 = time.perf_counter()
            nodes = len(onnx.load(m["path"]).graph.node)  # with its weights: the in-run reference
            m["onnx_load_s"] = time.perf_counter() - t0
            table = open_session(m["path"]).table  # the graph as the app's open reads it
            producer, names = table.producer, table.names
            m["producer_of"] = lambda t, producer=producer, names=names: names[producer[t]] if t in producer else None
            results["sizes"][size] = {"nodes": nodes, "reference_onnx_load_s": round(m["onnx_load_s"], 3), "cases": {}}
        panel = PreviewPanel()
        panel.resize(1200, 800)
        panel.show()
        drawn: list[int] = []
        panel.rendered.connect(drawn.append)
        drawn_after: list[float] = []
        panel.drawnAfter.connect(drawn_after.append)
        beat = Heartbeat()
        pauses = _CollectorPauses()

        def timed(size: str, case: str, change) -> None:
            drawn.clear()
            beat.start()
            pauses.longest = 0.0
            change()
            _wait(app, lambda: drawn)
            stall = beat.stop()
            seconds = drawn_after[-1]
            expected = netron_count(panel.server._data)
            if drawn[-1] != expected:
                raise AssertionError(f"{size} {case}: Netron drew {drawn[-1]} nodes, the model has {expected}")
            focused = panel.focused
            row = {"seconds": round(seconds, 3), "stall_ms": round(stall, 1), "gc_ms": round(pauses.longest * 1000, 1),
                   "drawn": drawn[-1],
                   "shown": focused.summary() if focused is not None and not focused.complete else "whole graph"}
            print(f"  {size} {case}: {seconds:.3f} s, drawn {drawn[-1]}, stall {stall:.0f} ms", flush=True)
            cases = results["sizes"][size]["cases"]
            if case not in cases or seconds < cases[case]["seconds"]:
                cases[case] = row
            else:
                cases[case]["stall_ms"] = max(cases[case]["stall_ms"], row["stall_ms"])
                cases[case]["gc_ms"] = max(cases[case]["gc_ms"], row["gc_ms"])

        try:
            first = next(iter(models.values()))
            panel.set_model(open_session(first["path"]), first["outputs"])  # warm-up: WebEngine, Netron
            _wait(app, lambda: drawn)
            for _ in range(ROUNDS):
                for size, m in models.items():
                    session = open_session(m["path"])  # opened afresh each round: its selections are built again
                    if panel.mode != "pruned":
                        drawn.clear()
                        panel.set_mode("pruned")
                        _wait(app, lambda: drawn)
                    panel.budget = panel.initial_budget  # "Show more" of the last round starts over
                    select = partial(panel.set_model, session, producer_of=m["producer_of"])
                    timed(size, "outputs", partial(select, m["outputs"]))
                    timed(size, "early layer", partial(select, m["layer"]))
                    if "tensor" in m:
                        drawn.clear()
                        select(m["outputs"])
                        _wait(app, lambda: drawn)
                        timed(size, "tree tensor", partial(panel.focus_node, m["tensor"]))
                        if panel.focused.seeds != [m["tensor"]]:
                            raise AssertionError(f"{size}: the preview did not focus on {m['tensor']}")
                        timed(size, "show more", panel.show_more)
                    else:
                        timed(size, "original", partial(panel.set_mode, "original"))
        finally:
            panel.shutdown()
            panel.deleteLater()
            app.processEvents()

    barred = [r["seconds"] for size, s in results["sizes"].items() if size in BARRED
              for case, r in s["cases"].items() if case not in UNBARRED]
    worst = max(barred, default=0.0)
    ok = worst <= BAR_S
    worst_stall = max((r["stall_ms"] for s in results["sizes"].values() for r in s["cases"].values()), default=0.0)
    results["bar"] = {"seconds": BAR_S, "worst_seconds": worst, "met": ok, "worst_stall_ms": worst_stall}
    (OUT / "preview_bench.json").write_text(json.dumps(results, indent=2))
    print("selection -> Netron drawn (debounce included), best of "
          f"{ROUNDS}; reference: onnx.load of the file with its weights")
    print(f"{'size':<6}{'nodes':>8}{'onnx.load s':>13}  {'case':<13}{'drawn':>7}{'s':>8}{'x load':>8}{'stall ms':>10}{'gc ms':>7}  shown")
    for size, s in results["sizes"].items():
        for k, (case, r) in enumerate(s["cases"].items()):
            lead = f"{size:<6}{s['nodes']:>8}{s['reference_onnx_load_s']:>13.3f}" if not k else " " * 27
            ratio = r["seconds"] / max(s["reference_onnx_load_s"], 1e-9)
            print(f"{lead}  {case:<13}{r['drawn']:>7}{r['seconds']:>8.3f}{ratio:>8.1f}{r['stall_ms']:>10.1f}{r['gc_ms']:>7.0f}  "
                  f"{r['shown'][:90]}")
    print(f"\nbar (every selection's preview at {', '.join(BARRED)} nodes <= {BAR_S} s; not show more): "
          f"{'MET' if ok else 'NOT MET'} "
          f"(worst {worst:.3f} s); worst GUI stall while previewing: {worst_stall:.0f} ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
