"""Cutting past 2 GB, and a 1 GB weight's histogram, in bounded memory (issue 39).

    python -m bench cut_bench            (CUT_BENCH_WIDTH=8192 CUT_BENCH_LAYERS=12 by default)

The model: a chain of `LAYERS` MatMul + Relu layers of `WIDTH` x `WIDTH` float32 weights (8192 x
12: 3.2 GB) in one external data file, written once to build/bench/cut/. Each tool cuts it from
layer 1's output to layer 10's (10 layers, 2.7 GB of weights), each run in its own process, with
its wall time and peak RSS (VmHWM, the process's own):
- onnxport: `onnxport export MODEL --from h1 --outputs h10 -o OUT` (external data above 2 GB);
- extract_model: `onnx.utils.extract_model(MODEL, OUT, ["h1"], ["h10"])`, ONNX's own extractor;
- Polygraphy (`surgeon extract`): run when installed (it is not in the app's environment; said so).
The cut model is checked (onnx.checker on the path, loads in ONNX Runtime) and its output compared
with the original model's h10 fed the same h1 (max abs). Then a 1 GB weight (16384 x 16384 float32,
external data): `onnxport inspect --tensor W --json` against numpy loading it whole (`np.fromfile` +
`np.histogram`), both peak RSS and the histograms compared. Bar: onnxport's peak RSS <= 0.25x the
bytes it cuts or reads (chunked: the weights are streamed, never held). Writes
build/bench/cut_bench.json; exit 1 if a bar is missed or the numbers differ.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "build" / "bench"
WIDTH = int(os.environ.get("CUT_BENCH_WIDTH", 8192))
LAYERS = int(os.environ.get("CUT_BENCH_LAYERS", 12))
BIG = int(os.environ.get("CUT_BENCH_BIG", 16384))  # the 1 GB weight's side
RSS_BAR = 0.25
HWM = ("import atexit, sys\n"
       "def hwm():\n"
       "    kb = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
       "    sys.stderr.write(f'\\nVmHWM {kb}\\n')\n"
       "atexit.register(hwm)\n")
EXTRACT = HWM + "import onnx.utils, sys\nonnx.utils.extract_model(sys.argv[1], sys.argv[2], ['h1'], ['h10'])\n"
CLI = HWM + "from onnxport.core.cli import main\nsys.exit(main(sys.argv[1:]))\n"
NUMPY_HIST = HWM + ("import numpy as np, sys, json\n"
                    "x = np.fromfile(sys.argv[1], dtype='<f4').astype(np.float64)\n"
                    "h = np.histogram(x, bins=64, range=(x.min(), x.max()))[0]\n"
                    "print(json.dumps({'histogram': h.tolist(), 'mean': x.mean(), 'std': x.std()}))\n")


def _chain(folder: Path, width: int, layers: int, name: str = "chain") -> Path:
    """The model and its one data file, weights written a layer at a time (never all in memory)."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper

    model_path = folder / f"{name}.onnx"
    if model_path.exists():
        return model_path
    data = folder / f"{name}.data"
    rng = np.random.default_rng(0)
    nodes, inits, offset, x = [], [], 0, "x"
    with open(data, "wb") as f:
        for i in range(layers):
            w = (rng.standard_normal((width, width), dtype=np.float32) * (1.0 / np.sqrt(width))).astype("<f4")
            f.write(w.tobytes())
            t = onnx.TensorProto(name=f"w{i}", data_type=T.FLOAT, dims=[width, width], data_location=T.EXTERNAL)
            for key, value in (("location", data.name), ("offset", str(offset)), ("length", str(w.nbytes))):
                t.external_data.add(key=key, value=value)
            offset += w.nbytes
            inits.append(t)
            nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"], name=f"/layer{i}/MatMul"),
                      helper.make_node("Relu", [f"m{i}"], [f"h{i}"], name=f"/layer{i}/Relu")]
            x = f"h{i}"
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", T.FLOAT, ["batch", width])],
                              [helper.make_tensor_value_info(x, T.FLOAT, ["batch", width])], inits)
    graph.value_info.extend(helper.make_tensor_value_info(f"h{i}", T.FLOAT, ["batch", width]) for i in range(layers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, model_path)
    return model_path


def _run(code: str, args: list[str]) -> dict:
    """One run in its own process: wall seconds, peak RSS, exit code, the last stderr line."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    lines = proc.stderr.strip().splitlines()
    hwm = [int(line.split()[1]) * 1024 for line in lines if line.startswith("VmHWM")]
    said = [line for line in lines if line.strip() and not line.startswith("VmHWM")]
    return {"seconds": round(seconds, 2), "peak_rss": hwm[-1] if hwm else None, "code": proc.returncode,
            "said": (said[-1][:200] if said else ""), "stdout": proc.stdout}


def _check(cut: Path, source: Path) -> float:
    """onnx.checker on the cut (by path: past 2 GB), then its h10 against the source's on the same h1."""
    import onnx
    import onnxruntime as ort

    onnx.checker.check_model(str(cut), full_check=True)
    x = np.random.default_rng(1).standard_normal((2, WIDTH)).astype(np.float32)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    h1, h10 = ort.InferenceSession(str(_probe(source)), options, providers=["CPUExecutionProvider"]).run(
        ["h1", "h10"], {"x": x})
    (got,) = ort.InferenceSession(str(cut), options, providers=["CPUExecutionProvider"]).run(None, {"h1": h1})
    return float(np.abs(got - h10).max())


def _probe(source: Path) -> Path:
    import onnx

    model = onnx.load(str(source), load_external_data=False)
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in ("h1",))
    model.graph.output.extend(vi for vi in model.graph.value_info if vi.name == "h10")
    probe = source.with_name("probe.onnx")
    onnx.save(model, str(probe))
    return probe


def _cut(folder: Path, source: Path) -> dict:
    cut_bytes = 10 * WIDTH * WIDTH * 4
    rows = {}
    out = folder / "onnxport_cut.onnx"
    rows["onnxport"] = _run(CLI, ["export", str(source), "--from", "h1", "--outputs", "h10", "-o", str(out), "-q"])
    if rows["onnxport"]["code"] == 0:
        rows["onnxport"]["max_abs_vs_source"] = _check(out, source)
    rows["extract_model"] = _run(EXTRACT, [str(source), str(folder / "extracted.onnx")])
    rows["polygraphy"] = ({"skipped": "polygraphy is not installed here"} if shutil.which("polygraphy") is None
                          else _run("import subprocess, sys\nsys.exit(subprocess.call(['polygraphy', 'surgeon', "
                                    "'extract', sys.argv[1], '--inputs', 'h1:auto:auto', '--outputs', 'h10:auto', "
                                    "'-o', sys.argv[2]]))", [str(source), str(folder / "polygraphy.onnx")]))
    for row in rows.values():
        if row.get("peak_rss"):
            row["peak_over_cut_bytes"] = round(row["peak_rss"] / cut_bytes, 3)
    return {"cut_bytes": cut_bytes, "tools": rows}


def _histogram(folder: Path) -> dict:
    source = _chain(folder, BIG, 1, "big_weight")
    rows = {"onnxport": _run(CLI, ["inspect", str(source), "--tensor", "w0", "--json"]),
            "numpy_whole": _run(NUMPY_HIST, [str(folder / "big_weight.data")])}
    ours = json.loads(rows["onnxport"]["stdout"])["tensor"] if rows["onnxport"]["code"] == 0 else None
    theirs = json.loads(rows["numpy_whole"]["stdout"]) if rows["numpy_whole"]["code"] == 0 else None
    for row in rows.values():
        row.pop("stdout")
        row["peak_over_bytes"] = round(row["peak_rss"] / (BIG * BIG * 4), 3) if row.get("peak_rss") else None
    same = ours is not None and theirs is not None and ours["histogram"] == theirs["histogram"]
    return {"bytes": BIG * BIG * 4, "tools": rows, "same_histogram": same}


def main() -> int:
    folder = OUT / "cut"
    folder.mkdir(parents=True, exist_ok=True)
    source = _chain(folder, WIDTH, LAYERS)
    results = {"model_bytes": LAYERS * WIDTH * WIDTH * 4, "cut": _cut(folder, source), "histogram": _histogram(folder)}
    for row in results["cut"]["tools"].values():
        row.pop("stdout", None)
    ours, hist = results["cut"]["tools"]["onnxport"], results["histogram"]
    ok = (ours["code"] == 0 and ours.get("max_abs_vs_source", 1.0) <= 1e-4 and ours["peak_over_cut_bytes"] <= RSS_BAR
          and hist["same_histogram"] and hist["tools"]["onnxport"]["peak_over_bytes"] <= RSS_BAR)
    results["bar"] = {"peak_over_bytes": RSS_BAR, "met": ok}
    (OUT / "cut_bench.json").write_text(json.dumps(results, indent=2))
    gb = 1 << 30
    print(f"cut of a {results['model_bytes'] / gb:.1f} GB chain, layer 1 -> 10 ({results['cut']['cut_bytes'] / gb:.1f} GB)")
    for tool, row in results["cut"]["tools"].items():
        if "skipped" in row:
            print(f"  {tool:<14} not run: {row['skipped']}")
            continue
        peak = f"{row['peak_rss'] / gb:.2f} GB ({row.get('peak_over_cut_bytes')}x)" if row.get("peak_rss") else "-"
        state = "ok" if row["code"] == 0 else f"FAILED: {row['said']}"
        extra = f", max abs vs source {row['max_abs_vs_source']:.2e}" if "max_abs_vs_source" in row else ""
        print(f"  {tool:<14} {row['seconds']:>7.1f} s  peak {peak}  {state}{extra}")
    print(f"histogram of a {hist['bytes'] / gb:.1f} GB weight (same as numpy's: {hist['same_histogram']})")
    for tool, row in hist["tools"].items():
        print(f"  {tool:<14} {row['seconds']:>7.1f} s  peak {row['peak_rss'] / gb:.2f} GB ({row['peak_over_bytes']}x)")
    print(f"\nbar (onnxport's peak RSS <= {RSS_BAR}x the bytes, numbers equal): {'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
