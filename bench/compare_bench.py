"""`onnxport compare`: bounded memory against keeping every tensor, and the structure diff at scale.

    python -m bench compare_bench [--skip-big] [--page 736] [--only memory|structure|big]

Measured in one run, each comparison in a process of its own (peak RSS = its VmHWM):
- memory: the PP-OCRv4 detector against a copy with noise in one mid Conv weight, on a page of
  --page x --page pixels: a single ONNX Runtime pass of the detector (the floor), the comparison
  as onnxport runs it (tensors exposed in bounded batches), and the same comparison exposing
  every tensor at once (Polygraphy's mark-all way). Bar: peak <= 3x the two files + 600 MB.
- structure: two decoder-like graphs of 100,000 nodes (bench/scale_models.py), B renamed node
  by node and tensor by tensor with a few weights changed; open (read + the loader's checks) and
  diff timed apart (the diff in wall and CPU time), 3 runs interleaved with the same-named pair,
  median and spread. Bar: the diff <= 2 s.
- big: a > 2 GB MLP (external data) against a copy whose middle weight is noisy (its own data
  file): the comparison's peak against a single ONNX Runtime pass of one model.
Writes build/bench/compare_bench.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.compare_models import big_pair, noisy_copy, renamed_copy
from bench.scale_models import transformer_model
from onnxport.core.evaluate.runtime import model_size

OUT = Path("build/bench")
MB = 1 << 20
CHILD = """
import json, sys, time
mode, a, b, page = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
start = time.perf_counter()
out = {}
if mode == "pass":
    import numpy as np, onnxruntime as ort
    sess = ort.InferenceSession(a, providers=["CPUExecutionProvider"])
    feed = {i.name: np.random.default_rng(0).random([d if isinstance(d, int) else 1 if k == 0 else page
            for k, d in enumerate(i.shape)], dtype=np.float32) for i in sess.get_inputs()}
    sess.run(None, feed)
else:
    from onnxport.core.compare.compare import compare
    from onnxport.core.compare.numeric import EXPOSED_BYTES
    r = compare(a, b, shapes={"x": (1, 3, page, page)} if page > 1 else None,
                budget=EXPOSED_BYTES if mode == "bounded" else None)
    f = r.numeric.first_divergence
    out = {"first_divergence": f.node if f else None, "runs": r.numeric.runs,
           "tensors": len(r.numeric.tensors), "weights_changed": [w.name for w in r.structure.weights_changed]}
out["seconds"] = time.perf_counter() - start
out["peak"] = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps(out))
"""


def _child(mode: str, a: Path, b: Path, page: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(a), str(b), str(page)], capture_output=True,
                          text=True)
    if proc.returncode:
        raise RuntimeError(f"{mode}: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def memory(folder: Path, page: int, detector: Path) -> dict:
    noisy = noisy_copy(detector, folder / "det_noisy.onnx")
    files = model_size(detector) + model_size(noisy)
    runs = {mode: _child(mode, detector, noisy, page) for mode in ("pass", "bounded", "all")}
    bar = 3 * files + 600 * MB
    return {"page": page, "files_bytes": files, "bar_bytes": bar, **runs,
            "bounded_within_bar": runs["bounded"]["peak"] <= bar}


def _timed_diff(a: Path, b: Path) -> tuple[float, float, float]:
    """(open wall, diff wall, diff CPU) in seconds: CPU time is what a loaded machine spreads out."""
    from onnxport.core.compare.sides import open_side
    from onnxport.core.compare.structure import structure_diff

    start = time.perf_counter()
    side_a, side_b = open_side(a), open_side(b)
    opened, cpu = time.perf_counter(), time.process_time()
    structure_diff(side_a, side_b)
    return opened - start, time.perf_counter() - opened, time.process_time() - cpu


def structure(folder: Path, nodes: int, repeats: int = 3) -> dict:
    a, same, renamed = folder / "a.onnx", folder / "same.onnx", folder / "renamed.onnx"
    count = transformer_model(a, nodes)
    same.write_bytes(a.read_bytes())
    changed = renamed_copy(a, renamed, changed_weights=5)
    times: dict[str, dict[str, list[float]]] = {k: {"open": [], "diff": [], "diff_cpu": []} for k in ("same", "renamed")}
    for _ in range(repeats):  # interleaved: both pairs see the same machine
        for key, b in (("same", same), ("renamed", renamed)):
            for part, seconds in zip(("open", "diff", "diff_cpu"), _timed_diff(a, b)):
                times[key][part].append(seconds)
    return {"nodes": count, "weights_changed": changed, **{k: {p: _spread(v) for p, v in t.items()}
                                                         for k, t in times.items()}}


def _spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def big(folder: Path) -> dict:
    a, b = big_pair(folder)
    files = model_size(a) + model_size(b)
    single = _child("pass", a, b, 1)
    bounded = _child("bounded", a, b, 1)
    return {"files_bytes": files, "pass": single, "bounded": bounded, "bar_bytes": 3 * files + 600 * MB,
            "within_bar": bounded["peak"] <= 3 * files + 600 * MB}


def _print(results: dict) -> None:
    m = results.get("memory")
    if m:
        print(f"detector on a {m['page']}x{m['page']} page (files {m['files_bytes'] / MB:.0f} MB, "
              f"bar {m['bar_bytes'] / MB:.0f} MB):")
        for mode, label in (("pass", "one ORT pass"), ("bounded", "compare (bounded)"), ("all", "keep every tensor")):
            r = m[mode]
            print(f"  {label:<20} peak {r['peak'] / MB:7.0f} MB  {r['seconds']:6.1f} s"
                  + (f"  first divergence {r['first_divergence']}, {r['runs']} runs" if mode != "pass" else ""))
    s = results.get("structure")
    if s:
        print(f"structure diff, two graphs of {s['nodes']:,} nodes (median of runs, min-max):")
        for key in ("same", "renamed"):
            o, d, c = s[key]["open"], s[key]["diff"], s[key]["diff_cpu"]
            print(f"  {key:<8} open {o['median']:.2f} s ({o['min']:.2f}-{o['max']:.2f})  "
                  f"diff {d['median']:.2f} s ({d['min']:.2f}-{d['max']:.2f}), "
                  f"CPU {c['median']:.2f} s ({c['min']:.2f}-{c['max']:.2f})")
    g = results.get("big")
    if g:
        print(f"> 2 GB pair (files {g['files_bytes'] / MB:.0f} MB): one ORT pass peak {g['pass']['peak'] / MB:.0f} MB, "
              f"compare peak {g['bounded']['peak'] / MB:.0f} MB ({g['bounded']['seconds']:.0f} s), "
              f"first divergence {g['bounded']['first_divergence']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench compare_bench")
    parser.add_argument("--page", type=int, default=736)
    parser.add_argument("--nodes", type=int, default=103_000)  # the decoder-like builder lands a little under
    parser.add_argument("--skip-big", action="store_true")
    parser.add_argument("--only", choices=["memory", "structure", "big"], help="one part only")
    args = parser.parse_args(argv)
    from tests.real.corpus import ocr_detector

    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="compare-bench-") as tmp:
        folder = Path(tmp)
        if args.only in (None, "memory"):
            results["memory"] = memory(folder, args.page, ocr_detector())
        if args.only in (None, "structure"):
            results["structure"] = structure(folder, args.nodes)
        if args.only == "big" or (args.only is None and not args.skip_big):
            results["big"] = big(folder)
    _print(results)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "compare_bench.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
