"""Checkpoint reading and writing: onnxport vs ONNX Runtime's load_checkpoint vs a plain file copy.

    python -m bench checkpoint_bench [--sizes 400MB,2.4GB,100k-tensors] [--skip-ort]

For each size a checkpoint of square float32 weights is written by `write_checkpoint` (the 2.4 GB
one with external data, as ORT itself writes checkpoints past ~1.8 GiB). Measured in one run:
- write: `write_checkpoint` from in-memory values (fsync included) vs copying the same bytes
  (copy + fsync, the disk's speed);
- rewrite: `write_checkpoint` of a `read_checkpoint` result (bytes copied file-to-file);
- open: `read_checkpoint` (metadata only, tensors memory-mapped), and reading every tensor once;
- ORT: `CheckpointState.load_checkpoint` in its own process (it copies every tensor), run by the
  training environment's Python (onnxruntime-training 1.19.2 lives only there, see
  `onnxport.core.training`); "n/a (no training environment)" without one.
Bars: opening takes milliseconds (not seconds) and is far faster than ORT's load; writing and
rewriting stay within 1.5x of a copy. The page cache is warm; disk times are the best of
`--repeats` runs (the disks here are shared and noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto

from onnxport.core.io.checkpoint import read_checkpoint
from onnxport.core.io.parameter_set import ParamTensor
from onnxport.core.training.environment import find_training_python
from onnxport.core.training.process import ISOLATED
from tests.support.checkpoint_writer import write_checkpoint

SIZES = {"400MB": (4096, 6, 1), "2.4GB": (8192, 9, 1), "100k-tensors": (4, 1, 100_000)}  # width, layers, repeat
OUT = Path("build/bench")
NO_TRAINING = "n/a (no training environment)"
ORT_LOAD = """
import sys, time, onnxruntime
onnxruntime.set_default_logger_severity(3)
from onnxruntime.training.api import CheckpointState
start = time.perf_counter(); CheckpointState.load_checkpoint(sys.argv[1]); print(time.perf_counter() - start)
"""


def _params(width: int, layers: int, repeat: int) -> dict:
    if repeat > 1:
        return {f"t{i}": np.full((width, width), i, np.float32) for i in range(repeat)}
    return {f"layer{i}.weight": ParamTensor(f"layer{i}.weight", TensorProto.FLOAT, (width, width),
                                            lambda i=i: np.full((width, width), i, np.float32))
            for i in range(layers)}


def _files(path: Path) -> list[Path]:
    return [p for p in (path, path.with_name(path.name + ".data")) if p.exists()]


def _copy(files: list[Path], folder: Path) -> float:
    start = time.perf_counter()
    for f in files:
        target = folder / f"copy_{f.name}"
        shutil.copyfile(f, target)
        fd = os.open(target, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    return time.perf_counter() - start


def _timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def run(label: str, root: Path, skip_ort: bool, repeats: int) -> dict:
    width, layers, repeat = SIZES[label]
    folder = Path(tempfile.mkdtemp(prefix=f"ckpt_{label}_", dir=root))
    path, external = folder / "checkpoint", label == "2.4GB"
    try:
        params = _params(width, layers, repeat)
        write_s = min(_timed(lambda: write_checkpoint(path, params, external_data=external))[0]
                      for _ in range(repeats))
        files = _files(path)
        nbytes = sum(f.stat().st_size for f in files)
        copy_s = min(_copy(files, folder) for _ in range(repeats))
        open_s, loaded = min((_timed(lambda: read_checkpoint(path)) for _ in range(3)), key=lambda r: r[0])
        touch_s, _ = _timed(lambda: [float(t.array().reshape(-1)[:: 1024].sum()) for t in loaded.values()])
        rewrite_s = min(_timed(lambda: write_checkpoint(folder / "rewritten", loaded, external_data=external))[0]
                        for _ in range(repeats))
        ort_s = ort_load_seconds(path) if not skip_ort else None
        return {"size": label, "bytes": nbytes, "tensors": len(loaded), "external_data": external,
                "write_s": write_s, "copy_s": copy_s, "rewrite_s": rewrite_s, "open_s": open_s, "touch_all_s": touch_s,
                "ort_load_s": ort_s}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def ort_load_seconds(path: Path) -> float | str | None:
    """ORT's load time in the training environment's Python; NO_TRAINING without one, None if it failed."""
    python = find_training_python()
    if python is None:
        return NO_TRAINING
    env = {k: v for k, v in os.environ.items() if k not in ISOLATED}
    proc = subprocess.run([str(python), "-c", ORT_LOAD, str(path)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(f"ORT load failed: {(proc.stderr.strip().splitlines() or ['?'])[-1][:300]}", file=sys.stderr)
        return None
    return float(proc.stdout.strip().splitlines()[-1])


def _print_row(r: dict) -> None:
    ort_s = r["ort_load_s"]
    ort = (f"{ort_s:.2f}s ({ort_s / r['open_s']:.0f}x onnxport's open)" if isinstance(ort_s, float)
           else ort_s or "-")
    disk = "" if r["tensors"] >= 1000 else (
        f"write {r['write_s']:.2f}s = {r['write_s'] / r['copy_s']:.2f}x copy | "
        f"rewrite {r['rewrite_s']:.2f}s = {r['rewrite_s'] / r['copy_s']:.2f}x copy | ")
    print(f"{r['size']:>12} {r['bytes'] / 1e9:.2f} GB {r['tensors']:>6} tensors | open {r['open_s'] * 1e3:.1f} ms | "
          f"{disk}ORT load {ort}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench checkpoint_bench")
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--skip-ort", action="store_true")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    for label in args.sizes.split(","):
        row = run(label, OUT, args.skip_ort, args.repeats)
        rows.append(row)
        _print_row(row)
    (OUT / "checkpoint_bench.json").write_text(json.dumps(rows, indent=2))
    big = [r for r in rows if r["tensors"] < 1000]
    ok = all(r["open_s"] < 0.05 and r["rewrite_s"] <= 1.5 * r["copy_s"] for r in big)
    print(f"\nbars (open < 50 ms, rewrite <= 1.5x copy): {'MET' if ok else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
