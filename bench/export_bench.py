"""Export speed and memory: onnxport vs ONNX Runtime's own export vs a plain file copy.

    python -m bench export_bench [--sizes 10MB,400MB,1.6GB,2.4GB] [--skip-ort]

For each size an MLP of square Gemm layers is built, ORT training artifacts are generated (at a
tiny width, then the declared parameter dims are widened: the graphs carry no weights), and an
ORT-loadable checkpoint with random weights is written. Three runs, each in its own process,
with warm page cache for all:
- copy: copy the checkpoint file(s) to a new file and fsync (the disk's speed);
- onnxport: `onnxport.core.api.export_for_inference`;
- ort: `CheckpointState.load_checkpoint` + `Module` + `export_model_for_inferencing`, run by the
  training environment's Python (onnxruntime-training 1.19.2 lives only there, see
  `onnxport.core.training`); the artifacts come from `generate_training_artifacts` through the
  same boundary. Without a training environment the eval graph is written by hand the way ORT
  writes it (parameters and labels as inputs, SoftmaxCrossEntropyLoss), and the ORT column says
  "n/a (no training environment)".
Reported: wall time, peak RSS above the process's baseline, ratios. Bars: onnxport <= 1.5x copy
where the copy takes at least 0.1 s (below, the ratio is a fixed cost of ~20 ms over a few ms of
copying: printed, not barred), peak RSS <= 1.3x parameter bytes; the > 2 GB case writes external
data and runs in ORT.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from onnxport.core.training.environment import find_training_python
from onnxport.core.training.process import ISOLATED, TrainingProcess

NO_TRAINING = "n/a (no training environment)"
SPEED_MIN_COPY_S = 0.1  # the speed bar holds where copying takes at least this long (`speed_barred`)
SIZES = {  # label -> (width, layers): parameter bytes ~ layers * width^2 * 4
    "10MB": (512, 10),
    "400MB": (4096, 6),
    "1.6GB": (8192, 6),
    "2.4GB": (8192, 9),
}
SMALL = 7  # width the artifacts are generated at, then widened
OUT = Path("build/bench")


def forward_model(layers: int, width: int):
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    nodes, inits, x = [], [], "input"
    for i in range(layers):
        w, b = f"layer{i}.weight", f"layer{i}.bias"
        inits += [numpy_helper.from_array(np.zeros((width, width), np.float32), w),
                  numpy_helper.from_array(np.zeros(width, np.float32), b)]
        y = f"h{i}" if i < layers - 1 else "logits"
        nodes.append(helper.make_node("Gemm", [x, w, b], [y + "_pre" if i < layers - 1 else y],
                                      name=f"/layer{i}/Gemm", transB=1))
        if i < layers - 1:
            nodes.append(helper.make_node("Relu", [y + "_pre"], [y], name=f"/act{i}/Relu"))
        x = y
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("input", T.FLOAT, ["batch", width])],
                              [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def _widen(path: Path, width: int) -> None:
    """Replace the tiny width in every declared dim (inputs, outputs, value_info) with `width`."""
    import onnx

    model = onnx.load(path)
    for vi in list(model.graph.input) + list(model.graph.output):
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value") and d.dim_value == SMALL:
                d.dim_value = width
    del model.graph.value_info[:]
    onnx.save(model, path)


def eval_graph_like_ort(layers: int, width: int):
    """The eval graph ORT's generate_artifacts writes for `forward_model` (when ORT is not here):
    parameters and `labels` become inputs, SoftmaxCrossEntropyLoss on `logits` is the only output."""
    from onnx import TensorProto as T
    from onnx import helper

    model = forward_model(layers, width)
    graph = model.graph
    params = [helper.make_tensor_value_info(t.name, T.FLOAT, list(t.dims)) for t in graph.initializer]
    del graph.initializer[:]
    graph.input.extend([helper.make_tensor_value_info("labels", T.INT64, ["batch"]), *params])
    graph.node.append(helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss", "log_prob"],
                                       reduction="mean"))
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("loss", T.FLOAT, []))
    return model


def prepare(label: str, width: int, layers: int, root: Path, training: TrainingProcess | None) -> dict:
    import onnx

    from onnxport.core.training.artifacts import generate_training_artifacts
    from tests.support.checkpoint_writer import write_checkpoint

    folder = (root / label).resolve()
    if training is not None:
        generate_training_artifacts(forward_model(layers, SMALL), folder, loss="crossentropy", optimizer="adamw",
                                    training=training)
        training.close()  # the child (torch and all) holds no memory while the runs are measured
        graphs = ("training_model.onnx", "eval_model.onnx")
    else:
        folder.mkdir(parents=True, exist_ok=True)
        onnx.save(eval_graph_like_ort(layers, SMALL), folder / "eval_model.onnx")
        graphs = ("eval_model.onnx",)
    for name in graphs:
        _widen(folder / name, width)
    rng = np.random.default_rng(0)
    weights = {}
    for i in range(layers):
        weights[f"layer{i}.weight"] = rng.standard_normal((width, width), dtype=np.float32) * float(width**-0.5)
        weights[f"layer{i}.bias"] = rng.standard_normal(width, dtype=np.float32) * np.float32(0.01)
    nbytes = sum(a.nbytes for a in weights.values())
    external = nbytes > 1_800_000_000
    write_checkpoint(folder / "checkpoint", weights, external_data=external)
    del weights
    files = [folder / "checkpoint"] + ([folder / "checkpoint.data"] if external else [])
    return {"folder": str(folder), "param_bytes": nbytes, "external": external, "files": [str(f) for f in files]}


RUNNER = r"""
import json, os, shutil, sys, time
task = json.loads(sys.argv[1])
folder = task["folder"]
kind = task["kind"]
os.chdir(folder)
if kind == "ort":
    import onnxruntime
    onnxruntime.set_default_logger_severity(3)
    from onnxruntime.training.api import CheckpointState, Module
elif kind == "onnxport":
    from onnxport.core.api import export_for_inference
# outputs of an earlier run are removed first, untimed (freeing a big file's blocks is not the export)
mine = {"copy": "copy_", "onnxport": "onnxport.onnx", "ort": "ort.onnx"}[kind]
for name in os.listdir(folder):
    if name.startswith(mine):
        os.unlink(name)
os.sync()
def status(key):  # from /proc (no psutil: the training environment has none)
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(key))
baseline = status("VmRSS")
t0 = time.perf_counter()
if kind == "copy":
    for src in task["files"]:
        dst = os.path.join(folder, "copy_" + os.path.basename(src))
        shutil.copyfile(src, dst)
        fd = os.open(dst, os.O_RDONLY); os.fsync(fd); os.close(fd)
elif kind == "onnxport":
    export_for_inference("eval_model.onnx", "checkpoint", ["logits"], "onnxport.onnx")
else:
    state = CheckpointState.load_checkpoint("checkpoint")
    module = Module("training_model.onnx", state, "eval_model.onnx", device="cpu")
    module.export_model_for_inferencing("ort.onnx", ["logits"])
seconds = time.perf_counter() - t0
# VmHWM is this address space's peak RSS (ru_maxrss would carry the parent's peak across exec)
peak = status("VmHWM")
print(json.dumps({"seconds": seconds, "peak_above_baseline": peak - baseline}))
"""


def measure(kind: str, prep: dict) -> dict:
    """One run in its own process: ORT's in the training environment's Python, the others in ours."""
    python = sys.executable
    env = dict(os.environ, ORT_LOGGING_LEVEL="3")
    if kind == "ort":
        training_python = find_training_python()
        if training_python is None:
            return {"skipped": NO_TRAINING}
        python = str(training_python)
        env = {k: v for k, v in env.items() if k not in ISOLATED}
    os.sync()  # start each run with no dirty pages left by the previous one (writeback throttling is noise)
    task = json.dumps({"kind": kind, "folder": prep["folder"], "files": prep["files"]})
    proc = subprocess.run([python, "-c", RUNNER, task], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:300]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _interleaved(prep: dict, repeats: int) -> dict:
    """copy, onnxport, copy, onnxport...: both see the same disk state (this VM's writeback swings
    single runs of either by 2-4x, in bursts), and the fastest of each is reported, as timeit
    does (noise only adds time). Every run's time is kept in `runs`."""
    runs: dict[str, list[dict]] = {"copy": [], "onnxport": []}
    for _ in range(repeats):
        for kind in runs:
            runs[kind].append(measure(kind, prep))
    out = {}
    for kind, results in runs.items():
        errors = [r for r in results if "error" in r]
        if errors:
            out[kind] = errors[0]
            continue
        best = min(results, key=lambda r: r["seconds"])
        out[kind] = dict(best, runs=[round(r["seconds"], 3) for r in results],
                         peak_above_baseline=max(r["peak_above_baseline"] for r in results))
    return out


def roundtrip(prep: dict) -> dict:
    """Run the onnxport export (and ORT's, when there) in ONNX Runtime; compare outputs."""
    import onnxruntime as ort

    folder = Path(prep["folder"])
    sess = ort.InferenceSession(str(folder / "onnxport.onnx"), providers=["CPUExecutionProvider"])
    width = sess.get_inputs()[0].shape[1]
    x = np.random.default_rng(1).standard_normal((2, width), dtype=np.float32)
    ours = sess.run(None, {"input": x})[0]
    result = {"runs": True, "external_data": (folder / "onnxport.onnx.data").exists()}
    if (folder / "ort.onnx").exists():
        theirs = ort.InferenceSession(str(folder / "ort.onnx"), providers=["CPUExecutionProvider"]).run(
            None, {"input": x})[0]
        result["max_abs_diff_vs_ort"] = float(np.abs(ours - theirs).max())
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--skip-ort", action="store_true")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs of copy and onnxport; the fastest of each is reported")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    training = TrainingProcess() if find_training_python() is not None else None
    if training is None:
        print(f"ORT column: {NO_TRAINING}", flush=True)
    with training or contextlib.nullcontext(), tempfile.TemporaryDirectory(dir=OUT, prefix="export-") as tmp:
        for label in args.sizes.split(","):
            width, layers = SIZES[label]
            prep = prepare(label, width, layers, Path(tmp), training)
            row = {"size": label, "param_bytes": prep["param_bytes"], "external_checkpoint": prep["external"]}
            row.update(_interleaved(prep, args.repeats))
            if not args.skip_ort:
                row["ort"] = measure("ort", prep)
            row["roundtrip"] = roundtrip(prep)
            copy_s, ours = row["copy"].get("seconds"), row["onnxport"]
            if copy_s and "seconds" in ours:
                row["onnxport_vs_copy"] = ours["seconds"] / copy_s
                row["onnxport_peak_vs_params"] = ours["peak_above_baseline"] / prep["param_bytes"]
            if "ort" in row and "seconds" in row["ort"] and "seconds" in ours:
                row["ort_vs_onnxport"] = row["ort"]["seconds"] / ours["seconds"]
            rows.append(row)
            _print_row(row)
            for f in Path(prep["folder"]).glob("*"):
                f.unlink()
    (OUT / "export_bench.json").write_text(json.dumps(rows, indent=2))
    ok = all((r.get("onnxport_vs_copy", 99) <= 1.5 or not speed_barred(r)) and r.get("onnxport_peak_vs_params", 99) <= 1.3
             and r["roundtrip"]["runs"] for r in rows)
    for r in rows:
        if not speed_barred(r) and "seconds" in r["onnxport"]:
            print(f"{r['size']}: a {1000 * r['copy']['seconds']:.0f} ms copy is below {SPEED_MIN_COPY_S} s; onnxport's "
                  f"fixed cost beyond it, {1000 * (r['onnxport']['seconds'] - r['copy']['seconds']):.0f} ms, is reported, not barred")
    print(f"\nbars (<= 1.5x copy where the copy takes >= {SPEED_MIN_COPY_S} s, peak <= 1.3x params, runs in ORT): "
          f"{'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


def speed_barred(row: dict) -> bool:
    """The speed bar measures disk speed: below SPEED_MIN_COPY_S of copying, the ratio is onnxport's
    fixed cost (the atomic write's fsyncs and rename, one shape inference: 15-30 ms) over a few ms."""
    return row.get("copy", {}).get("seconds", float("inf")) >= SPEED_MIN_COPY_S  # no copy time: barred (fails)


def _print_row(r: dict) -> None:
    def sec(k):
        v = r.get(k, {})
        return f"{v['seconds']:.2f}s" if "seconds" in v else v.get("error") or v.get("skipped") or "-"

    def mem(k):
        v = r.get(k, {}).get("peak_above_baseline")
        return f"{v / 1e9:.2f}GB" if v is not None else "-"

    print(f"{r['size']:>6} params {r['param_bytes'] / 1e9:.2f} GB | copy {sec('copy')} | onnxport {sec('onnxport')} "
          f"peak {mem('onnxport')} | ort {sec('ort')} peak {mem('ort')} | onnxport/copy "
          f"{r.get('onnxport_vs_copy', float('nan')):.2f}x, peak/params {r.get('onnxport_peak_vs_params', float('nan')):.2f}"
          f"x, ort/onnxport {r.get('ort_vs_onnxport', float('nan')):.1f}x | roundtrip {r['roundtrip']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
