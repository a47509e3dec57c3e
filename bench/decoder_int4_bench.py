"""Int4 at LLM scale: a decoder larger than the memory it may use, onnxport against ORT's DEFAULT int4.

    python -m bench decoder_int4_bench [--scale 1.0] [--seven-b] [--rounds 1] [--keep] [--int4-method M]

The model is bench/decoder_model.py's Llama-like decoder (random weights, written to disk a tensor
at a time, one external data file per layer): `--scale 1.0` is 2.0e9 parameters (36 layers, hidden
2048, 7.9 GB of float32), `--scale 0.2` a fifth of that; `--seven-b` adds the 7B-shaped one (32
layers, hidden 4096, ~27 GB) where the disk has room (else it says so). Each side runs in its own
process on a warm page cache, one at a time, alternating for `--rounds`:
- onnxport: `onnxport quantize MODEL --mode int4 --no-target -o OUT` (block 32, the held-out verdict;
  `--int4-method` passed on when given: `rtn` is ORT DEFAULT's method);
- ORT: `MatMulNBitsQuantizer` with its DEFAULT config (block 32, asymmetric, accuracy level 4), the
  model loaded with its external data (how ORT's quantizer takes it), saved with external data.
ORT is not run where its model alone would not fit in the machine's memory (said so).
Recorded: wall seconds, the peak RSS of the whole process tree (psutil, sampled every 0.1 s: file
pages a process maps count too), exit code, bytes written. Bars (issue #40): onnxport's peak RSS
<= 3 GiB and wall time <= 1.5x ORT's. Outputs are deleted after each run; the source stays under
build/bench/decoder_int4/ while its configuration is unchanged (`--keep` off: deleted at the end).
Writes build/bench/decoder_int4_bench.json; exit 1 if a bar is missed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import psutil

from bench.decoder_model import DecoderConfig, write_decoder

OUT = Path(__file__).resolve().parent.parent / "build" / "bench"
RSS_BAR = 3 << 30
TIME_BAR = 1.5
TWO_B = DecoderConfig(layers=36)  # 1.98e9 parameters
SEVEN_B = DecoderConfig(hidden=4096, heads=32, ffn=11008, layers=32)  # 6.7e9 parameters
ORT_DEFAULT = """import sys
import onnx
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
model = onnx.load(sys.argv[1])
q = MatMulNBitsQuantizer(model, block_size=32, is_symmetric=False, accuracy_level=4)
q.process()
q.model.save_model_to_file(sys.argv[2], use_external_data_format=True)
"""
ONNXPORT = "import sys\nfrom onnxport.core.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def scaled(config: DecoderConfig, scale: float) -> DecoderConfig:
    """`config` with its layer count scaled so its parameters are `scale` times as many."""
    fixed = 2 * config.vocab * config.hidden + config.hidden
    per_layer = (config.parameters() - fixed) / config.layers
    layers = max(1, round((config.parameters() * scale - fixed) / per_layer))
    return DecoderConfig(**{**asdict(config), "layers": layers})


def prepare(folder: Path, config: DecoderConfig) -> Path:
    """The decoder under `folder`, written unless the one there has this configuration."""
    stamp = folder / "config.json"
    wanted = json.dumps(asdict(config), sort_keys=True)
    if stamp.is_file() and stamp.read_text() == wanted and (folder / "model.onnx").is_file():
        return folder / "model.onnx"
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    files = write_decoder(folder, config)
    stamp.write_text(wanted)
    print(f"built {folder.name}: {config.parameters() / 1e9:.2f}e9 parameters, "
          f"{files.param_bytes / 2**30:.1f} GiB in {time.perf_counter() - start:.0f} s", flush=True)
    return files.model


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def run(args: list[str]) -> dict:
    """Run one command; wall seconds, the process tree's peak RSS, exit code, its last line."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]
    watched = psutil.Process(proc.pid)

    def sample() -> None:
        while proc.poll() is None:
            try:
                peak[0] = max(peak[0], tree_rss(watched))
            except psutil.Error:
                return
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    sampler.join()
    lines = [line for line in (out + err).strip().splitlines() if line.strip()]
    return {"seconds": round(seconds, 1), "peak_rss": peak[0], "code": proc.returncode,
            "said": lines[-1:]}


def written_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def warm(folder: Path) -> None:
    for f in sorted(folder.iterdir()):
        with open(f, "rb") as handle:
            while handle.read(64 << 20):
                pass


def side(name: str, model: Path, work: Path, extra: list[str]) -> dict:
    """One run of one side, its outputs measured and deleted."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    warm(model.parent)
    out = work / "int4.onnx"
    if name == "onnxport":
        result = run([sys.executable, "-c", ONNXPORT, "quantize", str(model), "--mode", "int4", "--no-target",
                      "-o", str(out), *extra])
    else:
        result = run([sys.executable, "-c", ORT_DEFAULT, str(model), str(out)])
    result["written_bytes"] = written_bytes(work)
    shutil.rmtree(work, ignore_errors=True)
    return result


def ort_fits(param_bytes: int) -> bool:
    """ORT's quantizer holds the float model and its result in memory: it runs where they fit."""
    return param_bytes * 1.2 < psutil.virtual_memory().available


def measure(label: str, config: DecoderConfig, rounds: int, keep: bool, extra: list[str]) -> dict:
    folder = OUT / "decoder_int4" / label
    need = config.parameters() * 4 * 1.4  # the source and the biggest output beside it
    free = shutil.disk_usage(OUT).free + (sum(p.stat().st_size for p in folder.iterdir()) if folder.is_dir() else 0)
    if need > free:
        return {"model": label, "skipped": f"needs {need / 2**30:.0f} GiB of disk, {free / 2**30:.0f} GiB free"}
    model = prepare(folder, config)
    param_bytes = config.parameters() * 4
    runs: dict[str, list[dict]] = {"onnxport": [], "ort_default": []}
    sides = ["ort_default", "onnxport"] if ort_fits(param_bytes) else ["onnxport"]
    for _ in range(rounds):
        for name in sides:
            runs[name].append(side(name, model, OUT / "decoder_int4" / "work", extra))
            print(f"  {label} {name}: {json.dumps(runs[name][-1])}", flush=True)
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return summary(label, config, runs, sides)


def summary(label: str, config: DecoderConfig, runs: dict, sides: list[str]) -> dict:
    best = {name: min(rs, key=lambda r: r["seconds"]) for name, rs in runs.items() if rs}
    ours = best["onnxport"]
    row = {"model": label, "parameters": config.parameters(), "param_bytes": config.parameters() * 4,
           "config": asdict(config), "runs": runs, "onnxport": ours}
    if "ort_default" not in sides:
        row["ort_default"] = "not run: ORT's quantizer holds the whole model in memory, more than is available"
    else:
        row["ort_default"] = best["ort_default"]
        row["time_ratio"] = round(ours["seconds"] / max(best["ort_default"]["seconds"], 1e-9), 2)
        row["time_spread"] = [round(r["seconds"] / o["seconds"], 2)
                              for r, o in zip(runs["onnxport"], runs["ort_default"])]
    misses = []
    if ours["code"] != 0:
        misses.append(f"onnxport failed: {ours['said']}")
    if ours["peak_rss"] > RSS_BAR:
        misses.append(f"peak RSS {ours['peak_rss'] / 2**30:.2f} GiB > {RSS_BAR / 2**30:.0f} GiB")
    if row.get("time_ratio", 0) > TIME_BAR:
        misses.append(f"time {row['time_ratio']}x ORT DEFAULT's > {TIME_BAR}x")
    row["misses"] = misses
    return row


def show(row: dict) -> None:
    if "skipped" in row:
        print(f"{row['model']}: skipped ({row['skipped']})")
        return
    print(f"{row['model']}: {row['parameters'] / 1e9:.2f}e9 parameters, {row['param_bytes'] / 2**30:.1f} GiB float32")
    for name in ("onnxport", "ort_default"):
        r = row[name]
        if isinstance(r, str):
            print(f"  {name:12s} {r}")
            continue
        print(f"  {name:12s} {r['seconds']:7.1f} s  peak RSS {r['peak_rss'] / 2**30:5.2f} GiB  "
              f"wrote {r['written_bytes'] / 2**30:5.2f} GiB  exit {r['code']}")
    if "time_ratio" in row:
        print(f"  time onnxport/ORT: {row['time_ratio']}x (per round: {row['time_spread']})")
    print("  bars: " + ("met" if not row["misses"] else "MISSED: " + "; ".join(row["misses"])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench decoder_int4_bench")
    parser.add_argument("--scale", type=float, default=1.0, help="parameters as a fraction of 2.0e9")
    parser.add_argument("--seven-b", action="store_true", help="also the 7B-shaped decoder (~27 GB)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the source models for the next run")
    parser.add_argument("--int4-method", help="onnxport's --int4-method (default: its own default)")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    extra = ["--int4-method", args.int4_method] if args.int4_method else []
    rows = [measure(f"2b_x{args.scale:g}", scaled(TWO_B, args.scale), args.rounds, args.keep, extra)]
    if args.seven_b:
        rows.append(measure("7b", SEVEN_B, args.rounds, args.keep, extra))
    for row in rows:
        show(row)
    (OUT / "decoder_int4_bench.json").write_text(json.dumps(rows, indent=1))
    return 1 if any(row.get("misses") for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
