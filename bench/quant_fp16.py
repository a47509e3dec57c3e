"""float16: onnxport's converter against onnxconverter-common's, on MiniLM and PP-OCRv4's detector.

Part of `python -m bench quant_bench` (its real-model section). For each float32 model (the MiniLM
that bench/quant_real.py exported, the detector of bench/quant_cnn.py):
- onnxport: `quantize(..., "fp16")`, timed whole (its range check, conversion, validation: shown),
  and its conversion itself (`fp16_mode.fp16`: load + convert + ORT's load check + save);
- peer: onnxconverter-common's `convert_float_to_float16(model, keep_io_types=True)`, in the
  peers' environment (`make bench-peers`: .venv-peers) as a subprocess, timed inside it around
  load + convert + save (its interpreter start not counted);
each result judged on the same held-out inputs (cosine of the worst output against float32).
Bars (issue 40: the whole job's time against the peer's is retired, the peer checks nothing):
onnxport's checked result at cosine >= 0.99 on every model (the peer's cosine shown beside it),
its conversion <= `TIME_RATIO` x the peer's.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import numpy as np

PEERS_PYTHON = Path(".venv-peers/bin/python")
TIME_RATIO = 2.0
MIN_COSINE = 0.99
_PEER = """
import sys, time, onnx
from onnxconverter_common import float16
t = time.perf_counter()
model = onnx.load(sys.argv[1])
model = float16.convert_float_to_float16(model, keep_io_types=True)
onnx.save(model, sys.argv[2])
print(time.perf_counter() - t)
"""


def peer_fp16(src: Path, dst: Path) -> dict:
    """onnxconverter-common's conversion of `src` to `dst`: {"seconds": ...} or {"refused": why}."""
    if not PEERS_PYTHON.is_file():
        return {"refused": "no peers environment (make bench-peers)"}
    done = subprocess.run([str(PEERS_PYTHON), "-c", _PEER, str(src), str(dst)], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        return {"refused": (done.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return {"seconds": float(done.stdout.strip().splitlines()[-1])}


def _min_cosine(model: Path, fp32: Path, feeds: list[dict[str, np.ndarray]]) -> float:
    import onnxruntime as ort

    try:
        got_sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - a peer's model ORT cannot load: no cosine
        print(f"  {model.name} does not load: {str(exc).splitlines()[0][:160]}")
        return float("nan")
    want_sess = ort.InferenceSession(str(fp32), providers=["CPUExecutionProvider"])
    names = [o.name for o in want_sess.get_outputs()]
    takes = {i.name for i in want_sess.get_inputs()}
    dots = {n: np.zeros(3) for n in names}
    for feed in ({k: v for k, v in f.items() if k in takes} for f in feeds):
        for name, g, w in zip(names, got_sess.run(names, feed), want_sess.run(names, feed), strict=True):
            g, w = np.asarray(g, np.float64).ravel(), np.asarray(w, np.float64).ravel()
            dots[name] += (g @ w, g @ g, w @ w)
    return min(float(d[0] / np.sqrt(d[1] * d[2])) if d[1] and d[2] else 0.0 for d in dots.values())


def compare(name: str, fp32: Path, feeds: list[dict[str, np.ndarray]], work: Path) -> dict:
    """One model's two rows (onnxport, peer) and their ratio."""
    from onnxport.core.quantize.quantize import quantize
    from onnxport.core.util.errors import OnnxportError

    ours = work / f"{fp32.stem}.fp16.onnx"
    t = time.perf_counter()
    try:
        result = quantize(fp32, ours, "fp16")
        row = {"seconds": time.perf_counter() - t, "size_ratio": result.size_bytes / result.source_size_bytes,
               "cosine": _min_cosine(ours, fp32, feeds), "notes": result.notes,
               "conversion_seconds": _conversion(fp32, work / f"{fp32.stem}.conversion.fp16.onnx")}
    except OnnxportError as exc:
        row = {"seconds": time.perf_counter() - t, "refused": exc.one_line()}
    peer_path = work / f"{fp32.stem}.peer.fp16.onnx"
    peer = peer_fp16(fp32, peer_path)
    if "seconds" in peer:
        peer["size_ratio"] = peer_path.stat().st_size / fp32.stat().st_size
        peer["cosine"] = _min_cosine(peer_path, fp32, feeds)
    ratio = row["conversion_seconds"] / peer["seconds"] if "seconds" in peer and "refused" not in row else None
    return {"model": name, "onnxport": row, "peer": peer, "time_ratio": ratio}


def _conversion(fp32: Path, dst: Path) -> float:
    """Seconds of onnxport's conversion alone, as the peer's is timed (the job's first attempt)."""
    from onnxport.core.quantize.fp16_mode import fp16
    from onnxport.core.quantize.options import QuantizeOptions

    o = QuantizeOptions()
    t = time.perf_counter()
    fp16(fp32, dst, keep_io_types=o.keep_io_types, block_ops=o.block_ops, exclude=[], big=False)
    return time.perf_counter() - t


def run(models: list[tuple[str, Path, list[dict[str, np.ndarray]]]], work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    return {"peer": "onnxconverter-common convert_float_to_float16 (keep_io_types)",
            "rows": [compare(name, path, feeds, work) for name, path, feeds in models]}


def bars(data: dict) -> dict[str, bool]:
    verdicts = {}
    for r in data["rows"]:
        ours = r["onnxport"]
        theirs = r["peer"].get("cosine")
        beside = f" (the peer's {theirs:.4f})" if isinstance(theirs, float) else ""
        verdicts[f"{r['model']} fp16: checked result cosine >= {MIN_COSINE}{beside}"] = (
            ours.get("cosine", 0.0) >= MIN_COSINE)
        verdicts[f"{r['model']} fp16: conversion <= {TIME_RATIO}x the peer's"] = (
            r["time_ratio"] is not None and r["time_ratio"] <= TIME_RATIO)
    return verdicts


def table(data: dict) -> str:
    lines = [("", "seconds (conversion)", "size x", "cosine (held out)")]
    for r in data["rows"]:
        for who, row in (("onnxport", r["onnxport"]), ("onnxconverter-common", r["peer"])):
            label = f"{r['model']}, {who}"
            if "refused" in row:
                lines.append((label, "-", "-", row["refused"][:100]))
                continue
            conversion = f" ({row['conversion_seconds']:.2f})" if "conversion_seconds" in row else ""
            lines.append((label, f"{row['seconds']:.2f}{conversion}", f"{row['size_ratio']:.3f}",
                          f"{row['cosine']:.5f}"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines)


def minilm_feeds(held_out_npz: Path) -> list[dict[str, np.ndarray]]:
    data = np.load(held_out_npz)
    return [{k: data[k] for k in data.files}]
