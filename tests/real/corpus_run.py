"""`make corpus`: ONNX's backend test models through onnxport, counted per step and per outcome.

    python -m tests.real.corpus_run [--jobs N] [--only SUBSTRING ...] [--sample] [--json OUT.jsonl]

Each model runs in a worker process (`--worker`: model names on stdin, one JSON line per step
start and per result on stdout), so a crash that kills the process (a signal inside ONNX Runtime)
is counted against the step it was in, and the worker is started again. A model that takes longer
than MODEL_TIMEOUT_S is counted as a crash of its step. The counts per step and per outcome are
printed at the end, for models ONNX Runtime runs and, apart, for those it cannot; then every
crash, invalid output and wrong result, one line each. Exit 1 when there is any.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.real.backend_corpus import BAD_OUTCOMES as BAD
from tests.real.backend_corpus import OUTCOMES, STEPS, BackendModel, backend_models, run_model

MODEL_TIMEOUT_S = 300.0

# The sample `make test` runs (tests/real/test_backend_corpus.py): a fixed few dozen models that
# cover what broke before (grouped Conv, ConvTranspose, *_expanded mid tensors, Conv models under
# quantize --mode dynamic, IR 3 models) and the kinds of graph the corpus holds.
SAMPLE = (
    "node/test_abs", "node/test_add_bcast", "node/test_constant", "node/test_dropout_default_mask",
    "node/test_if", "node/test_loop11", "node/test_scan9_sum", "node/test_sequence_insert_at_back",
    "node/test_optional_get_element_sequence", "node/test_cast_FLOAT_to_FLOAT8E4M3FN",
    "node/test_layer_normalization_2d_axis0_expanded", "node/test_sce_mean_weight_expanded",
    "node/test_gelu_tanh_2_expanded", "node/test_range_float_type_positive_delta_expanded",
    "node/test_convtranspose", "node/test_conv_with_strides_padding", "node/test_matmul_2d",
    "node/test_gemm_default_single_elem_vector_bias", "node/test_gather_0", "node/test_lstm_defaults",
    "node/test_reshape_reordered_all_dims", "node/test_resize_downsample_scales_linear",
    "node/test_string_split_basic", "node/test_einsum_batch_matmul",
    "pytorch-converted/test_ConvTranspose2d", "pytorch-converted/test_Conv2d_groups",
    "pytorch-converted/test_Conv2d_depthwise_padded", "pytorch-converted/test_Linear",
    "pytorch-converted/test_BatchNorm2d_eval", "pytorch-converted/test_Embedding",
    "pytorch-operator/test_operator_conv", "pytorch-operator/test_operator_add_broadcast",
    "simple/test_expand_shape_model1", "simple/test_gradient_of_add",
    "light/light_squeezenet", "light/light_shufflenet", "node/test_training_dropout_mask",
    "node/test_split_to_sequence_2",
)


def worker() -> int:
    """Run the models named on stdin, one per line; report on stdout (see the module docstring)."""
    root = Path(sys.argv[sys.argv.index("--root") + 1])
    models = {m.name: m for m in backend_models(root)}
    real_stdout = os.fdopen(os.dup(1), "w", buffering=1)  # the protocol's own channel
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # what else writes to fd 1 (ORT, C code) goes nowhere
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        with tempfile.TemporaryDirectory(prefix="onnxport-corpus-") as work:
            result = run_model(models[name], Path(work),
                               lambda step: real_stdout.write(json.dumps({"step": step}) + "\n"))
        real_stdout.write(result.to_json() + "\n")
    return 0


class _Worker:
    def __init__(self, root: Path, selector: selectors.BaseSelector) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.real.corpus_run", "--worker", "--root", str(root)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.selector = selector
        selector.register(self.proc.stdout, selectors.EVENT_READ, self)
        self.model: str | None = None
        self.step = "start"
        self.started = 0.0
        self.buffer = b""  # read with os.read: a buffered readline would hide a second line from select

    def give(self, model: str) -> None:
        self.model, self.step, self.started = model, "start", time.monotonic()
        self.proc.stdin.write(model.encode() + b"\n")
        self.proc.stdin.flush()

    def lines(self) -> list[bytes] | None:
        """The complete lines it wrote since last asked; None when it died."""
        chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
        if not chunk:
            return None
        self.buffer += chunk
        *done, self.buffer = self.buffer.split(b"\n")
        return done

    def stop(self) -> None:
        self.selector.unregister(self.proc.stdout)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _died(model: str, step: str, why: str) -> dict:
    steps = {s: "n/a" for s in STEPS}
    steps[step if step in steps else "inspect"] = "crash"
    return {"name": model, "ort_runs": step != "ort", "steps": steps, "notes": {step: why}}


def run_all(models: list[BackendModel], root: Path, jobs: int, log) -> list[dict]:
    """Every model through a pool of `jobs` workers; the results in the order they end."""
    todo = [m.name for m in models]
    results: list[dict] = []
    selector = selectors.DefaultSelector()
    workers = [_Worker(root, selector) for _ in range(max(1, min(jobs, len(todo))))]

    def feed(w: _Worker) -> None:
        w.model = None
        if todo:
            w.give(todo.pop(0))

    def replace(w: _Worker, why: str) -> None:
        w.stop()
        results.append(_died(w.model, w.step, why))
        log(results[-1])
        fresh = workers[workers.index(w)] = _Worker(root, selector)
        feed(fresh)

    for w in workers:
        feed(w)
    while any(w.model for w in workers):
        for key, _ in selector.select(timeout=1.0):
            w = key.data
            lines = w.lines()
            if lines is None:  # died: a crash in the step it was in
                replace(w, f"the process died (exit {w.proc.poll()})")
                continue
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if "step" in event:
                    w.step = event["step"]
                    continue
                results.append(event)
                log(event)
                feed(w)
        for w in list(workers):
            if w.model and time.monotonic() - w.started > MODEL_TIMEOUT_S:
                replace(w, f"over {MODEL_TIMEOUT_S:.0f} s")
    for w in workers:
        w.stop()
    return results


def counts_table(results: list[dict]) -> list[str]:
    """Per step, per outcome: the models ORT runs, then apart those it cannot."""
    lines = []
    for label, group in (("ONNX Runtime runs the source", [r for r in results if r["ort_runs"]]),
                         ("ONNX Runtime cannot run the source (counted apart)", [r for r in results if not r["ort_runs"]])):
        lines.append(f"{label}: {len(group)} models")
        lines.append("  " + "step".ljust(10) + "".join(o.rjust(9) for o in OUTCOMES))
        for step in STEPS:
            c = Counter(r["steps"].get(step, "n/a") for r in group)
            lines.append("  " + step.ljust(10) + "".join(str(c.get(o, 0)).rjust(9) for o in OUTCOMES))
    return lines


def problems(results: list[dict]) -> list[str]:
    return [f"{r['name']}: {step} {outcome}: {r['notes'].get(step, '')}"
            for r in sorted(results, key=lambda r: r["name"]) for step, outcome in r["steps"].items()
            if outcome in BAD]


def main(argv: list[str] | None = None) -> int:
    if "--worker" in sys.argv:
        return worker()
    parser = argparse.ArgumentParser(prog="corpus_run", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", action="append", default=[], metavar="SUBSTRING")
    parser.add_argument("--sample", action="store_true", help="only the sample make test runs")
    parser.add_argument("--json", metavar="OUT.jsonl", help="also write every result, one JSON line each")
    args = parser.parse_args(argv)
    from tests.real.corpus import onnx_backend_data

    root = onnx_backend_data()
    models = backend_models(root)
    if args.sample:
        models = [m for m in models if m.name in SAMPLE]
    if args.only:
        models = [m for m in models if any(s in m.name for s in args.only)]
    sink = open(args.json, "w", encoding="utf-8") if args.json else None  # noqa: SIM115 - lives for the run
    done = [0]
    started = time.monotonic()

    def log(result: dict) -> None:
        done[0] += 1
        bad = [f"{s} {o}" for s, o in result["steps"].items() if o in BAD]
        if bad or done[0] % 100 == 0:
            print(f"[{done[0]}/{len(models)} {time.monotonic() - started:.0f} s] {result['name']}"
                  + (f": {', '.join(bad)}" if bad else ""), file=sys.stderr, flush=True)
        if sink is not None:
            sink.write(json.dumps(result) + "\n")
            sink.flush()

    results = run_all(models, root, args.jobs, log)
    print(f"{len(results)} models in {time.monotonic() - started:.0f} s")
    print("\n".join(counts_table(results)))
    found = problems(results)
    print(f"{len(found)} crashes, invalid outputs or wrong results" + (":" if found else ""))
    print("\n".join(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
