"""LLM scale end to end: a ~1B-parameter decoder in external data, through the CLI, timed and measured.

    python -m bench decoder_bench [--layers 16] [--keep]

The model is bench/decoder_model.py's (16 Llama-like layers, hidden 2048, ~23k nodes, ~3.8 GB of
float32 weights in 18 data files); it is built once under build/bench/decoder/ and reused while
its configuration is unchanged (--keep is the default; delete the folder to rebuild). Each step
runs `onnxport` in its own process, warm page cache; wall time and the process's peak RSS
(`wait4`) are recorded:

1. inspect: load the graph and index it (what opening it costs);
2. export of an early exit (the residual stream after layer 1: embeddings + 2 layers kept);
3. validate that export against the original model on generated token ids;
4. export of the whole model (logits) with external data.

References in the same run: a plain copy of the bytes each export keeps (`cp`, coreutils: one
copy_file_range per file, as a user copies weights; then fsync), i.e. the disk's speed for them.
Copy and export alternate, three rounds, best of each. Every timed step starts from the same state:
every file the steps before wrote deleted (the whole work folder), `sync` run and the source files
read once more, *before* the clock starts. On this VM kind a copy written while an earlier 3.6 GB
output still sat in the folder took 2-6x longer (even a `cp`), and DAMON reclaims page cache idle
for a few seconds (a `cp` after a 5 s pause took 4 s instead of 1.6 s): noise, not the export. Bars (issue #16): export <= 1.5x the copy of its
weights, peak RSS <= 0.25x the parameter bytes (the copy bar is the whole model's: an early exit's
ratio is printed, but its 0.7 GB copy takes 0.35 s, less than starting Python, importing onnx and
reading the 23k-node graph, a fixed ~0.7 s that `inspect` shows too). The app's side of the same flow is measured by
decoder_app_bench, gui_bench (open, stall) and preview_bench. Writes build/bench/decoder_bench.json;
exit 1 if a bar is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from bench.decoder_model import DecoderConfig, write_decoder

OUT = Path(__file__).resolve().parent.parent / "build" / "bench"
COPY_BAR = 1.5
RSS_BAR = 0.25
# The CLI in a process that reports its own peak RSS at exit: VmHWM belongs to the process's own
# memory map, while wait4's ru_maxrss starts from the parent's RSS at fork (exec keeps it).
CLI = [sys.executable, "-c", "import atexit, sys\n"
       "def hwm():\n"
       "    kb = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
       "    sys.stderr.write(f'\\nVmHWM {kb}\\n')\n"
       "atexit.register(hwm)\n"
       "from onnxport.core.cli import main\n"
       "sys.exit(main(sys.argv[1:]))\n"]


def run(args: list[str]) -> dict:
    """Run one command; wall seconds, peak RSS bytes, exit code, last stderr line."""
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    lines = proc.stderr.strip().splitlines()
    peak = [int(line.split()[1]) * 1024 for line in lines if line.startswith("VmHWM ")]
    said = [line for line in lines if not line.startswith("VmHWM ") and line.strip()]
    return {"seconds": round(seconds, 2), "peak_rss": peak[-1] if peak else 0, "code": proc.returncode,
            "said": (said or proc.stdout.strip().splitlines() or [""])[-1][:200]}


ROUNDS = 3


def quiet_disk(work: Path, dst: Path, sources: list[Path] = ()) -> None:
    """Empty the work folder, flush the disk, read `sources` into the page cache and make `dst`
    (in `work`), before a clock starts (see the module docstring)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    os.sync()
    warm(sources)
    dst.mkdir(parents=True)


def copy_files(files: list[Path], work: Path) -> dict:
    """A plain copy of `files` into a folder of `work` (`cp`), then fsync: the disk's speed for them."""
    dst = work / "copy"
    quiet_disk(work, dst, files)
    start = time.perf_counter()
    subprocess.run(["cp", *map(str, files), str(dst)], check=True)
    for f in files:
        with open(dst / f.name, "rb+") as handle:
            os.fsync(handle.fileno())
    return {"seconds": round(time.perf_counter() - start, 2), "code": 0}


def export_to(args: list[str], work: Path, sources: list[Path]) -> dict:
    dst = work / "export"
    quiet_disk(work, dst, sources)
    return run([*args, "-o", str(dst / "model.onnx")])


def copy_vs_export(files: list[Path], export_args: list[str], work: Path, model: Path) -> tuple[dict, dict]:
    """Best of ROUNDS alternating copies and exports (the same disk state before each)."""
    copies, exports = [], []
    for _ in range(ROUNDS):
        copies.append(copy_files(files, work))
        exports.append(export_to(export_args, work, [model, *files]))
    best = min(exports, key=lambda r: (r["code"] != 0, r["seconds"]))
    best["all_seconds"] = [r["seconds"] for r in exports]
    copy = {"seconds": min(c["seconds"] for c in copies), "all_seconds": [c["seconds"] for c in copies]}
    return copy, best


def warm(files: list[Path]) -> None:
    for f in files:
        with open(f, "rb") as handle:
            while handle.read(64 << 20):
                pass


def prepare(folder: Path, config: DecoderConfig):
    stamp = folder / "config.json"
    wanted = json.dumps(asdict(config), sort_keys=True)
    manifest = folder / "files.json"
    if stamp.is_file() and stamp.read_text() == wanted and manifest.is_file():
        info = json.loads(manifest.read_text())
        return info
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    files = write_decoder(folder, config)
    info = {"model": str(files.model), "data_files": [str(p) for p in files.data_files],
            "param_bytes": files.param_bytes, "layer_outputs": files.layer_outputs,
            "bytes_through_layer": files.bytes_through_layer, "build_seconds": round(time.perf_counter() - start, 1)}
    manifest.write_text(json.dumps(info))
    stamp.write_text(wanted)
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decoder_bench")
    parser.add_argument("--layers", type=int, default=DecoderConfig.layers)
    parser.add_argument("--skip", default="", help="steps to skip, e.g. validate_early")
    args = parser.parse_args(argv)
    config = DecoderConfig(layers=args.layers)
    folder = OUT / "decoder"
    info = prepare(folder, config)
    model, data = Path(info["model"]), [Path(p) for p in info["data_files"]]
    params = info["param_bytes"]
    early = info["layer_outputs"][1]
    early_files = [f for f in data if f.name in ("embed_tokens.bin", "layers.0.bin", "layers.1.bin")]
    early_bytes = info["bytes_through_layer"][1]
    work = OUT / "decoder-out"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    warm([model, *data])
    import onnx

    nodes = len(onnx.load(model, load_external_data=False).graph.node)
    print(f"decoder: {params / 1e9:.2f} GB of parameters ({params // 4 / 1e9:.2f} B float32), {nodes} nodes, "
          f"{len(data)} data files")
    results = {"config": asdict(config), "nodes": nodes, "param_bytes": params, "steps": {}}
    steps = results["steps"]
    steps["inspect"] = run([*CLI, "inspect", str(model)])
    steps["copy_early"], steps["export_early"] = copy_vs_export(
        early_files, [*CLI, "export", str(model), "--outputs", early, "-q"], work, model)
    steps["copy_early"]["bytes"] = early_bytes
    early_out = work / "early"
    quiet_disk(work, early_out)
    run([*CLI, "export", str(model), "--outputs", early, "-q", "-o", str(early_out / "early_exit.onnx")])
    skipped = set(args.skip.split(","))
    steps["validate_early"] = {"seconds": 0.0, "peak_rss": 0, "code": 0, "said": "skipped"} \
        if "validate_early" in skipped else run([*CLI, "validate", str(early_out / "early_exit.onnx"),
                                                 "--reference", str(model), "--dim", "batch=1",
                                                 "--dim", "sequence=32", "-q"])
    steps["copy_all"], steps["export_full"] = copy_vs_export(
        data, [*CLI, "export", str(model), "--outputs", "logits", "-q"], work, model)
    steps["copy_all"]["bytes"] = params
    shutil.rmtree(work, ignore_errors=True)

    rows, ok = [], True
    for name, copy in (("export_early", "copy_early"), ("export_full", "copy_all")):
        step, ref = steps[name], steps[copy]
        step["vs_copy"] = round(step["seconds"] / ref["seconds"], 2) if ref["seconds"] else None
        step["rss_vs_params"] = round(step["peak_rss"] / params, 3)
        step["beyond_copy_seconds"] = round(step["seconds"] - ref["seconds"], 2)
        passed = step["code"] == 0 and step["rss_vs_params"] <= RSS_BAR
        if name == "export_full":  # the bar is the 1B-parameter export's (see the module docstring)
            passed &= step["vs_copy"] <= COPY_BAR
        ok &= passed
        rows.append((name, step, ref, passed))
    for name in ("inspect", "validate_early"):
        steps[name]["rss_vs_params"] = round(steps[name]["peak_rss"] / params, 3)
        ok &= steps[name]["code"] == 0
    results["bars"] = {"export_vs_copy": COPY_BAR, "rss_vs_params": RSS_BAR, "met": ok}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "decoder_bench.json").write_text(json.dumps(results, indent=2))

    print(f"\n{'step':16} {'s':>7} {'peak RSS':>10} {'RSS/params':>10} {'copy s':>7} {'x copy':>7} {'exit':>5}")
    for name in ("inspect", "export_early", "validate_early", "export_full"):
        step = steps[name]
        copy = {"export_early": steps["copy_early"], "export_full": steps["copy_all"]}.get(name)
        print(f"{name:16} {step['seconds']:7.2f} {step['peak_rss'] / 2**20:8.0f}MB {step['rss_vs_params']:10.3f} "
              f"{copy['seconds'] if copy else float('nan'):7.2f} {step.get('vs_copy') or float('nan'):7.2f} "
              f"{step['code']:5d}")
        if step["code"]:
            print(f"  {name}: {step['said']}")
    early = steps["export_early"]
    print(f"early exit: {early['beyond_copy_seconds']:.2f} s beyond its copy (inspect alone: {steps['inspect']['seconds']:.2f} s)")
    print(f"\nbars (1B export <= {COPY_BAR}x copy of its weights, peak RSS <= {RSS_BAR}x parameter bytes): "
          f"{'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
