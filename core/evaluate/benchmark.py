"""Is it faster? Latency and throughput of one or two models in ONNX Runtime, side by side.

Contract: `benchmark([a, b])` opens a CPU session per model (load time measured), feeds all the
same input (from a file, or generated from the first model's input specs: `batch` samples, sizes
from `shapes`/`dim_sizes` or fitted to the model by a first run in a child process, see
first_run.py; an ORT failure is one line naming the input shapes), warms up, then runs the models in
*alternating* rounds - a then b, repeated - so drift in the machine's speed (other processes,
frequency scaling) hits both alike. Each timed sample is `repeat` runs, calibrated per model during
warm-up so that a sample lasts >= 1 ms (timing.py). It stops after `seconds` of measuring per model
(at least `min_runs`, at most `max_samples` samples). Reported per model: file size (with external
data), p10/p50/p90/mean/min latency per run, throughput in samples/s from p50 (not the outlier-driven
mean), the p10-p90 spread (a note when it is wide); and, for two models, the second against the
first: size ratio, latency ratio (p50) and speed-up, with a note when a float16 second model is not
faster (expected on CPUs without native float16 math). Nothing is written.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from onnxport.core.evaluate.feeds import FeedsLike
from onnxport.core.evaluate.first_run import fitted_feeds
from onnxport.core.evaluate.input_specs import input_specs
from onnxport.core.evaluate.runtime import (
    adapt_feed,
    describe_feed,
    intra_op_threads,
    model_size,
    precision_of,
    run,
    session,
)
from onnxport.core.evaluate.timing import (
    BUSY_SPREAD_PCT,
    SAMPLE_SECONDS,
    calibrate_repeat,
    percentiles_ms,
    spread_pct,
)
from onnxport.core.io.light_read import load_light_graph
from onnxport.core.io.model_io import check_model_file
from onnxport.core.util.errors import OnnxportError
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter
from onnxport.core.util.text import human_size

FP16_SLOWER = ("the float16 model is not faster than float32 here: expected on a CPU without native float16 "
               "math (ONNX Runtime's CPU kernels convert to float32 and back); float16 halves the size, and "
               "pays off on GPUs and CPUs with float16 arithmetic")


@dataclass
class ModelBench:
    path: str
    size_bytes: int
    load_seconds: float
    runs: int
    batch: int
    p50_ms: float
    p90_ms: float
    mean_ms: float
    min_ms: float
    throughput: float  # samples per second at this batch size, from p50: batch * 1000 / p50_ms
    p10_ms: float = 0.0
    spread_pct: float = 0.0  # (p90 - p10) / p50, in percent
    repeat: int = 1  # runs per timed sample (runs = timed_samples * repeat)
    timed_samples: int = 0

    def to_dict(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


@dataclass
class BenchReport:
    models: list[ModelBench]
    inputs: str
    threads: int | None
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def size_ratio(self) -> float | None:
        return self.models[1].size_bytes / self.models[0].size_bytes if len(self.models) > 1 else None

    @property
    def latency_ratio(self) -> float | None:
        return self.models[1].p50_ms / self.models[0].p50_ms if len(self.models) > 1 else None

    @property
    def speedup(self) -> float | None:
        ratio = self.latency_ratio
        return 1.0 / ratio if ratio else None

    def to_dict(self) -> dict:
        def r(v):
            return None if v is None else round(v, 4)

        return {"models": [m.to_dict() for m in self.models], "inputs": self.inputs, "threads": self.threads,
                "size_ratio": r(self.size_ratio), "latency_ratio": r(self.latency_ratio),
                "speedup": r(self.speedup), "seconds": round(self.seconds, 3), "notes": self.notes}

    def summary_lines(self) -> list[str]:
        lines = [f"benchmark on {self.inputs} (ONNX Runtime CPU, threads {self.threads or 'default'}):"]
        for m in self.models:
            lines.append(f"  {Path(m.path).name}: {human_size(m.size_bytes)}, p50 {m.p50_ms:.3f} ms, "
                         f"p90 {m.p90_ms:.3f} ms, {m.throughput:.1f} samples/s (spread {m.spread_pct:.0f}% "
                         f"p10-p90; {m.runs} runs, {m.timed_samples} timings of {m.repeat})")
        if len(self.models) > 1:
            lines.append(f"  second vs first: size x{self.size_ratio:.3f}, latency x{self.latency_ratio:.3f} "
                         f"({self.speedup:.2f}x {'faster' if self.speedup >= 1 else 'as fast'})")
        return lines + [f"  note: {n}" for n in self.notes]


def benchmark(
    model_paths: Sequence[str | Path],
    *,
    inputs: FeedsLike = None,
    batch: int = 1,
    dim_sizes: Mapping[str, int] | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    warmup: int = 3,
    seconds: float = 2.0,
    min_runs: int = 5,
    max_samples: int = 20000,
    threads: int | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> BenchReport:
    started = time.perf_counter()
    threads = intra_op_threads(threads)  # as the sessions will run, for the report
    paths = [Path(p) for p in model_paths]
    if not 1 <= len(paths) <= 2:
        raise OnnxportError("bench takes one or two models")
    report = Reporter(progress, cancel)
    graph = load_light_graph(paths[0])  # its weights are ORT's to read
    specs = input_specs(graph)
    for path in paths[1:]:
        check_model_file(path)  # before ORT reads its external data (and outside the timed load)
    feeds = fitted_feeds(paths[0], inputs, model=graph, specs=specs, references=paths[1:], count=1,
                         batch_size=batch, batch=batch, dim_sizes=dim_sizes, shapes=shapes, cancel=report.token)
    feed = feeds.first()
    described = "generated inputs" if feeds.generated else feeds.description
    samples = next((int(v.shape[0]) for v in feed.values() if v.ndim), 1)
    sessions, loads = [], []
    for i, path in enumerate(paths):
        report.check()
        report(0.02 + 0.03 * i, f"loading {path.name}")
        t0 = time.perf_counter()
        sessions.append(session(path, threads=threads, checked=True))
        loads.append(time.perf_counter() - t0)
    model_feeds = []
    for path, sess in zip(paths, sessions):
        missing = [i.name for i in sess.get_inputs() if i.name not in feed]
        if missing:
            raise OnnxportError(f"{path}: needs input(s) {', '.join(missing)} that {paths[0].name} does not take; "
                                "benchmark models with the same inputs")
        model_feeds.append(adapt_feed(feed, sess))
    warm: list[list[float]] = [[] for _ in sessions]
    for _ in range(max(warmup, 1)):  # at least one run outside the timed loop: its failure is one line
        report.check()
        for k, (path, sess, f) in enumerate(zip(paths, sessions, model_feeds)):
            t0 = time.perf_counter()
            run(sess, None, f, label=path.name, hint=feeds.hint)
            warm[k].append(time.perf_counter() - t0)
    repeats = []
    for k, (sess, f) in enumerate(zip(sessions, model_feeds)):
        report.check()
        slow = min(warm[k]) >= SAMPLE_SECONDS  # every warm-up run was long enough: one run per sample
        repeats.append(1 if slow else calibrate_repeat(lambda s=sess, f=f: s.run(None, f)))
    times = _measure(sessions, model_feeds, repeats, seconds * len(sessions), min_runs, max_samples, report)
    results = []
    for path, load, t, repeat in zip(paths, loads, times, repeats):
        p = percentiles_ms(t)
        results.append(ModelBench(
            path=str(path), size_bytes=model_size(path), load_seconds=load, runs=len(t) * repeat, batch=samples,
            p50_ms=p["p50"], p90_ms=p["p90"], mean_ms=p["mean"], min_ms=p["min"],
            throughput=samples * 1000.0 / p["p50"], p10_ms=p["p10"],
            spread_pct=spread_pct(p["p10"], p["p50"], p["p90"]), repeat=repeat, timed_samples=len(t),
        ))
    shapes = describe_feed(feed)
    report(1.0, "measured")
    bench = BenchReport(results, f"{described} ({shapes})", threads, time.perf_counter() - started)
    busy = spread_note(results)
    bench.notes += [busy] if busy else []
    note = fp16_note(bench, precision_of(load_light_graph(paths[1]))) if len(paths) == 2 else None
    bench.notes += [note] if note else []
    return bench


def _measure(sessions: list, model_feeds: list, repeats: list[int], budget: float, min_samples: int,
             max_samples: int, report: Reporter) -> list[list[float]]:
    """Per-run seconds of each timed sample, models in alternating rounds, until `budget` seconds
    have passed (at least `min_samples`, at most `max_samples` samples per model)."""
    times: list[list[float]] = [[] for _ in sessions]
    t_start = time.perf_counter()
    last_report = 0.0
    while True:
        for k, (sess, f, repeat) in enumerate(zip(sessions, model_feeds, repeats)):
            t0 = time.perf_counter()
            for _ in range(repeat):
                sess.run(None, f)
            times[k].append((time.perf_counter() - t0) / repeat)
        count = len(times[0])
        elapsed = time.perf_counter() - t_start
        if count >= max_samples or (count >= min_samples and elapsed >= budget):
            return times
        if elapsed - last_report > 0.2:
            last_report = elapsed
            done = max(elapsed / budget, count / max_samples)  # whichever ends the loop first
            report(0.05 + 0.95 * min(done, 1.0), f"measuring ({count} timings)")
        else:
            report.check()


def spread_note(models: Sequence[ModelBench]) -> str | None:
    """Which models' timings spread over BUSY_SPREAD_PCT (p10-p90 against p50), if any."""
    busy = [Path(m.path).name for m in models if m.spread_pct > BUSY_SPREAD_PCT]
    return (f"timings spread widely ({', '.join(busy)}: p10-p90 over {BUSY_SPREAD_PCT:.0f}% of p50): "
            "the machine was busy; figures are rough") if busy else None


def fp16_note(bench: BenchReport, second_precision: str) -> str | None:
    """Why a float16 second model is not faster, when it is not (else None)."""
    slower = bench.latency_ratio is not None and bench.latency_ratio >= 1.0
    return FP16_SLOWER if slower and second_precision == "float16" else None
