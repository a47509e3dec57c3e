"""Static QDQ of a real CNN: PP-OCRv4's text detector (rapidocr's package) on rendered text pages.

Part of `python -m bench quant_bench` (its real-model section). Pages: lines of words on paper-like
backgrounds rendered with Qt (tests/real/text_images.py), 320 x 320, normalized as rapidocr feeds
its detector ((x / 255 - 0.5) / 0.5). 16 pages calibrate (a folder of .npy, as a user gives them
with --calibration) and validate the search; 8 others judge (saved as held_out.npy). Rows:
- "defaults": `quantize(..., "static")` as a user first runs it (every op type, per-channel);
- "tuned": `--op-types Conv,ConvTranspose --per-channel --exclude <the backbone's first 21
  convolutions>` (high-resolution stages with a few activation channels 10x the others);
- "ort": the peer, ORT's `quantize_static` (QDQ, its defaults) on the same 16 pages.
Bars (`BARS`, the defaults row, against ORT's time in this run): cosine and text-mask agreement
(probability > 0.3, as rapidocr binarizes) >= 0.99 on the held-out pages, size <= 0.6x, latency
<= 0.85x (1 page), time <= 1.0x ORT's; the tuned row keeps size <= 0.5x and the accuracy bars.
Int8 path pinned to AVX2 (7-bit weights, exact on every x86 CPU)."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import numpy as np

SIZE, CALIBRATION_PAGES, HELD_OUT_PAGES = 320, 16, 8
THRESHOLD = 0.3
BARS = {"size_ratio": 0.6, "latency_ratio": 0.85, "time_ratio": 1.0, "min_cosine": 0.99, "mask_agreement": 0.99}
TUNED_SIZE = 0.5
BACKBONE_HIGH_RES = [f"p2o.Conv.{i}" for i in range(21)]


def detector() -> Path | None:
    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "models" / "ch_PP-OCRv4_det_infer.onnx"


def _pages(work: Path) -> tuple[Path, np.ndarray]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # a bench is a front end: this process only
    from PySide6.QtGui import QGuiApplication

    from tests.real.text_images import rapidocr_page

    _app = QGuiApplication.instance() or QGuiApplication([])
    folder = work / "pages"
    folder.mkdir(exist_ok=True)
    for i in range(CALIBRATION_PAGES):
        np.save(folder / f"page{i:02d}.npy", rapidocr_page(SIZE, seed=1000 + i))
    held_out = np.concatenate([rapidocr_page(SIZE, seed=2000 + i) for i in range(HELD_OUT_PAGES)])
    del _app
    np.save(work / "held_out.npy", held_out)
    return folder, held_out


def ort_static(fp32: Path, pages: Path, dst: Path) -> float:
    """ORT's `quantize_static` (QDQ, its defaults) on the calibration pages; its seconds."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Pages(CalibrationDataReader):
        def __init__(self) -> None:
            self.files = iter(sorted(pages.glob("*.npy")))

        def get_next(self):
            path = next(self.files, None)
            return None if path is None else {"x": np.load(path)}

    t = time.perf_counter()
    quantize_static(str(fp32), str(dst), Pages(), quant_format=QuantFormat.QDQ)
    return time.perf_counter() - t


def _judge(model: Path, fp32: Path, held_out: np.ndarray, seconds: float, threads: int) -> dict:
    import onnxruntime as ort

    from onnxport.core.evaluate.benchmark import benchmark

    def run(path: Path) -> np.ndarray:
        return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": held_out})[0]

    want, got = run(fp32), run(model)
    a, b = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    bench = benchmark([fp32, model], inputs={"x": held_out[:1]}, seconds=seconds, threads=threads)
    return {"size_ratio": bench.size_ratio, "latency_ratio": bench.latency_ratio,
            "p50_ms": [m.p50_ms for m in bench.models], "cosine": float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))),
            "mask_agreement": float(((got > THRESHOLD) == (want > THRESHOLD)).mean()),
            "text_fraction": float((want > THRESHOLD).mean())}


def run(work: Path, seconds: float, threads: int) -> dict:
    from onnxport.core.quantize.quantize import QuantizeOptions, quantize
    from onnxport.core.util.errors import OnnxportError

    fp32 = detector()
    if fp32 is None or not fp32.is_file():
        return {"skipped": "rapidocr_onnxruntime is not installed (pip install --no-deps -r tests/real/models.txt)"}
    pages, held_out = _pages(work)
    rows: dict[str, dict] = {}
    peer = work / "ort.qdq.onnx"
    took = [ort_static(fp32, pages, peer)]  # before and after onnxport's runs: the machine's load alternates too
    for key, options in (("defaults", {}), ("tuned", {"op_types": ["Conv", "ConvTranspose"], "per_channel": True,
                                                      "exclude_nodes": BACKBONE_HIGH_RES})):
        t = time.perf_counter()
        label = "static, defaults" if key == "defaults" else "static, Conv per-channel, backbone stages 1-3 float"
        try:
            result = quantize(fp32, work / f"{key}.qdq.onnx", "static",
                              QuantizeOptions(calibration=pages, int8_path="avx2", **options))
        except OnnxportError as exc:
            rows[key] = {"label": label, "refused": exc.one_line(), "seconds": time.perf_counter() - t}
            continue
        rows[key] = {"label": label, "seconds": time.perf_counter() - t, "kept_float_nodes": result.kept_float_nodes,
                     **_judge(result.path, fp32, held_out, seconds, threads)}
    took.append(ort_static(fp32, pages, peer))
    rows["ort"] = {"label": "ORT quantize_static (QDQ, defaults)", "seconds": sum(took) / len(took),
                   "seconds_each": took, "kept_float_nodes": [],
                   **_judge(peer, fp32, held_out, seconds, threads)}
    return {"model": {"name": "PP-OCRv4 text detector", "fp32_bytes": fp32.stat().st_size},
            "inputs": f"{CALIBRATION_PAGES} calibration pages, {HELD_OUT_PAGES} held out, {SIZE} x {SIZE}",
            "threads": threads, "rows": rows}


def bars(data: dict) -> dict[str, bool]:
    rows = data["rows"]
    r, tuned, ort = rows["defaults"], rows["tuned"], rows["ort"]
    ok, ok_tuned = "refused" not in r, "refused" not in tuned
    return {f"defaults: size ratio <= {BARS['size_ratio']}": ok and r["size_ratio"] <= BARS["size_ratio"],
            f"defaults: latency ratio <= {BARS['latency_ratio']}": ok and r["latency_ratio"] <= BARS["latency_ratio"],
            f"defaults: cosine >= {BARS['min_cosine']} (held out)": ok and r["cosine"] >= BARS["min_cosine"],
            f"defaults: text mask agreement >= {BARS['mask_agreement']}":
                ok and r["mask_agreement"] >= BARS["mask_agreement"],
            f"defaults: time <= {BARS['time_ratio']}x ORT's quantize_static":
                r["seconds"] <= BARS["time_ratio"] * ort["seconds"],
            f"tuned: size ratio <= {TUNED_SIZE}": ok_tuned and tuned["size_ratio"] <= TUNED_SIZE,
            f"tuned: cosine >= {BARS['min_cosine']} (held out)": ok_tuned and tuned["cosine"] >= BARS["min_cosine"],
            f"tuned: text mask agreement >= {BARS['mask_agreement']}":
                ok_tuned and tuned["mask_agreement"] >= BARS["mask_agreement"]}


def table(data: dict) -> str:
    lines = [("", "seconds", "size x", "p50 ms fp32 -> int8", "latency x", "cosine", "mask", "kept float")]
    for r in data["rows"].values():
        if "refused" in r:
            lines.append((r["label"], f"{r['seconds']:.1f}", "-", "-", "-", "-", "-", r["refused"][:100]))
            continue
        lines.append((r["label"], f"{r['seconds']:.1f}", f"{r['size_ratio']:.3f}",
                      f"{r['p50_ms'][0]:.1f} -> {r['p50_ms'][1]:.1f}", f"{r['latency_ratio']:.3f}",
                      f"{r['cosine']:.4f}", f"{r['mask_agreement']:.4f}", str(len(r["kept_float_nodes"]))))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines)
