"""Graph preview latency: from a selection change to Netron having drawn, on a BERT-size graph.

    python -m bench preview_bench

The model: an eval graph like ORT training's (BERT-like encoder, 8 layers, hidden 512, FFN 2048,
Erf GELU, Dropout, a classification head with SoftmaxCrossEntropyLoss on `labels`), written with
onnx.helper, ~100 MB of weights in an external data file, a few hundred nodes. The real
PreviewPanel (offscreen WebEngine, loopback server, Netron's page) is timed from `set_model` /
`set_mode` (debounce included) to its `rendered` signal, best of 3 per case:
  pruned @ logits, pruned @ layer 4 (a selection change), original (the toggle).
Reference in the same run: the same selection change with the page reloaded for each model (what
opening Netron on a URL does; the panel opens later models in the running page instead). Also
shown: `onnx.load` of the model with its weights (what a preview with weights would read first).
Bar: pruned selection change <= 1.5 s.
Writes build/bench/preview_bench.json; exit 1 if the bar is missed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
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
REPEATS = 3


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


def _wait(app, predicate, timeout: float = 120) -> None:
    end = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > end:
            raise TimeoutError("Netron did not draw in time")
        app.processEvents()
        time.sleep(0.002)


def main() -> int:
    from PySide6.QtCore import QCoreApplication, Qt
    from PySide6.QtWidgets import QApplication

    QCoreApplication.setAttribute(Qt.AA_ShareOpenGLContexts)
    import PySide6.QtWebEngineWidgets  # noqa: F401 - before the QApplication

    from onnxport.core.graph.preview import preview_model
    from onnxport.gui.preview.preview_panel import PreviewPanel

    app = QApplication.instance() or QApplication([])
    OUT.mkdir(parents=True, exist_ok=True)
    results: dict = {"cases": {}}
    with tempfile.TemporaryDirectory(dir=OUT, prefix="preview-") as tmp:
        path = bert_eval_model(Path(tmp))
        t0 = time.perf_counter()
        full = onnx.load(path)
        load_s = time.perf_counter() - t0
        params = tuple(t.name for t in full.graph.initializer if t.name.endswith((".weight", ".bias")))
        weight_mb = (path.with_name("eval_model.onnx.data").stat().st_size) / 1e6
        results.update(nodes=len(full.graph.node), weights_mb=round(weight_mb, 1), reference_onnx_load_s=round(load_s, 3))
        expected = {"reference": len(preview_model(full, ["logits"], params).graph.node), "logits": len(preview_model(full, ["logits"], params).graph.node),
                    "layer4": len(preview_model(full, ["layer4"], params).graph.node),
                    "original": len(full.graph.node)}
        del full
        panel = PreviewPanel()
        panel.resize(1200, 800)
        panel.show()
        drawn: list[int] = []
        panel.rendered.connect(drawn.append)

        def timed(case: str, change) -> None:
            best = None
            for _ in range(REPEATS):
                drawn.clear()
                change()
                _wait(app, lambda: drawn)
                seconds = panel.render_seconds
                best = seconds if best is None else min(best, seconds)
                if drawn[-1] != expected[case]:
                    raise AssertionError(f"{case}: Netron drew {drawn[-1]} nodes, expected {expected[case]}")
            reference = results["cases"].get("reference", {}).get("seconds", best)
            results["cases"][case] = {"nodes": expected[case], "seconds": round(best, 3),
                                      "ratio_to_reference": round(best / reference, 2)}

        try:
            panel.set_model(str(path), ["logits"], params)  # warm-up: WebEngine start, Netron's scripts cached
            _wait(app, lambda: drawn)

            def select(outputs):
                def change():
                    panel.set_mode("pruned")
                    panel.set_model(str(path), outputs, params)
                return change

            panel.reuse_page = False
            timed("reference", select(["logits"]))
            panel.reuse_page = True
            timed("logits", select(["logits"]))
            timed("layer4", select(["layer4"]))

            def toggle():
                if panel.mode != "pruned":
                    panel.set_mode("pruned")
                    _wait(app, lambda: drawn)
                    drawn.clear()
                panel.set_mode("original")

            timed("original", toggle)
        finally:
            panel.shutdown()
            panel.deleteLater()
            app.processEvents()

    worst = max(results["cases"][c]["seconds"] for c in ("logits", "layer4"))
    ok = worst <= BAR_S
    results["bar"] = {"seconds": BAR_S, "met": ok}
    (OUT / "preview_bench.json").write_text(json.dumps(results, indent=2))
    print(f"model: {results['nodes']} nodes, {weight_mb:.0f} MB of weights; reference onnx.load with weights: "
          f"{load_s:.3f} s")
    print("reference: the same change to 'logits' with a page reload per model")
    print(f"{'case':<12}{'nodes':>7}{'change->drawn s':>17}{'x reference':>13}")
    for case, r in results["cases"].items():
        print(f"{case:<12}{r['nodes']:>7}{r['seconds']:>17.3f}{r['ratio_to_reference']:>13.2f}")
    print(f"\nbar (selection change -> drawn <= {BAR_S} s, debounce included): {'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
