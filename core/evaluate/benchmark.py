"""Is it faster? Latency and throughput of one or two models in ONNX Runtime, side by side.

Contract: `benchmark([a, b])` opens a CPU session per model (load time measured), feeds all the
same input (from a file, or generated from the first model's input specs: `batch` samples, sizes
from `shapes`/`dim_sizes` or fitted to the model by a first run in a child process, see
first_run.py; an ORT failure is one line naming the input shapes), warms up, then times the models
interleaved in blocks A B B A (timing.interleaved), each timed sample `repeat` runs calibrated per
model so that it lasts >= 1 ms, for `seconds` per model (at least `min_runs` samples and, for two
models, MIN_BLOCKS blocks). Reported per model: size, p10/p50/p90/mean/min latency per run,
throughput from p50, the p10-p90 spread (a note when wide); for two models, the second against
the first: size ratio and the paired latency ratio (median of the per-block ratios) with its 95%
interval: "no measurable difference" when it holds 1.0 (a model against itself), else faster or
slower with the interval; a note when a float16 second model is not faster. Nothing is written.
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
    RatioEstimate,
    calibrate_repeat,
    interleaved,
    paired_ratio,
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
MIN_BLOCKS = 6  # the fewest paired blocks whose order-statistic interval reaches 95%


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
    ratio: RatioEstimate | None = None  # the second model's latency over the first's, paired

    @property
    def size_ratio(self) -> float | None:
        return self.models[1].size_bytes / self.models[0].size_bytes if len(self.models) > 1 else None

    @property
    def latency_ratio(self) -> float | None:
        """The median of the per-block latency ratios (second over first), not a ratio of p50s."""
        return self.ratio.median if self.ratio is not None else None

    @property
    def speedup(self) -> float | None:
        ratio = self.latency_ratio
        return 1.0 / ratio if ratio else None

    def to_dict(self) -> dict:
        def r(v):
            return None if v is None else round(v, 4)

        return {"models": [m.to_dict() for m in self.models], "inputs": self.inputs, "threads": self.threads,
                "size_ratio": r(self.size_ratio), "latency_ratio": r(self.latency_ratio),
                "speedup": r(self.speedup), "paired": self.ratio.to_dict() if self.ratio is not None else None,
                "verdict": self.ratio.verdict() if self.ratio is not None else None,
                "seconds": round(self.seconds, 3), "notes": self.notes}

    def summary_lines(self) -> list[str]:
        lines = [f"benchmark on {self.inputs} (ONNX Runtime CPU, threads {self.threads or 'default'}):"]
        for m in self.models:
            lines.append(f"  {Path(m.path).name}: {human_size(m.size_bytes)}, p50 {m.p50_ms:.3f} ms, "
                         f"p90 {m.p90_ms:.3f} ms, {m.throughput:.1f} samples/s (spread {m.spread_pct:.0f}% "
                         f"p10-p90; {m.runs} runs, {m.timed_samples} timings of {m.repeat})")
        if self.ratio is not None:
            lines.append(f"  second vs first: size x{self.size_ratio:.3f}, {self.ratio.verdict()}")
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
    sessions, loads = _open_sessions(paths, threads, report)
    model_feeds = []
    for path, sess in zip(paths, sessions):
        missing = [i.name for i in sess.get_inputs() if i.name not in feed]
        if missing:
            raise OnnxportError(f"{path}: needs input(s) {', '.join(missing)} that {paths[0].name} does not take; "
                                "benchmark models with the same inputs")
        model_feeds.append(adapt_feed(feed, sess))
    repeats = _warm_up(paths, sessions, model_feeds, warmup, feeds.hint, report)
    runs = [lambda s=sess, f=f: s.run(None, f) for sess, f in zip(sessions, model_feeds)]
    times = _measure(runs, repeats, seconds * len(sessions), min_runs, max_samples, report)
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
    bench = BenchReport(results, f"{described} ({shapes})", threads, time.perf_counter() - started,
                        ratio=paired_ratio(*times) if len(times) == 2 else None)
    busy = spread_note(results)
    bench.notes += [busy] if busy else []
    note = fp16_note(bench, precision_of(load_light_graph(paths[1]))) if len(paths) == 2 else None
    bench.notes += [note] if note else []
    return bench


def _open_sessions(paths: list[Path], threads: int | None, report: Reporter) -> tuple[list, list[float]]:
    """A CPU session per model and the seconds each took to load."""
    sessions, loads = [], []
    for i, path in enumerate(paths):
        report.check()
        report(0.02 + 0.03 * i, f"loading {path.name}")
        t0 = time.perf_counter()
        sessions.append(session(path, threads=threads, checked=True, spinning=True))
        loads.append(time.perf_counter() - t0)
    return sessions, loads


def _warm_up(paths: list[Path], sessions: list, model_feeds: list, warmup: int, hint: str | None,
             report: Reporter) -> list[int]:
    """Warm-up runs (at least one, outside the timed loop: its failure is one line), then each
    model's runs per timed sample (timing.calibrate_repeat)."""
    warm: list[list[float]] = [[] for _ in sessions]
    for _ in range(max(warmup, 1)):
        report.check()
        for k, (path, sess, f) in enumerate(zip(paths, sessions, model_feeds)):
            t0 = time.perf_counter()
            run(sess, None, f, label=path.name, hint=hint)
            warm[k].append(time.perf_counter() - t0)
    repeats = []
    for k, (sess, f) in enumerate(zip(sessions, model_feeds)):
        report.check()
        slow = min(warm[k]) >= SAMPLE_SECONDS  # every warm-up run was long enough: one run per sample
        repeats.append(1 if slow else calibrate_repeat(lambda s=sess, f=f: s.run(None, f)))
    return repeats


def _measure(runs: list, repeats: list[int], budget: float, min_samples: int, max_samples: int,
             report: Reporter) -> list[list[float]]:
    """Per-run seconds of each timed sample per model, interleaved (timing.interleaved) until
    `budget` seconds have passed: at least `min_samples` samples per model (and MIN_BLOCKS blocks
    for two), at most about `max_samples`."""
    per_block = 2 if len(runs) == 2 else 1
    min_blocks = max(-(-min_samples // per_block), MIN_BLOCKS if per_block == 2 else 1)
    max_blocks = max(max_samples // per_block, min_blocks)
    last = [0.0]

    def tick(elapsed: float, blocks: int) -> None:
        if elapsed - last[0] > 0.2:
            last[0] = elapsed
            done = max(elapsed / budget, blocks / max_blocks)  # whichever ends the loop first
            report(0.05 + 0.95 * min(done, 1.0), f"measuring ({blocks * per_block} timings)")
        else:
            report.check()

    return interleaved(runs, repeats, budget=budget, min_blocks=min_blocks, max_blocks=max_blocks, tick=tick)


def spread_note(models: Sequence[ModelBench]) -> str | None:
    """Which models' timings spread over BUSY_SPREAD_PCT (p10-p90 against p50), if any."""
    busy = [Path(m.path).name for m in models if m.spread_pct > BUSY_SPREAD_PCT]
    return (f"timings spread widely ({', '.join(busy)}: p10-p90 over {BUSY_SPREAD_PCT:.0f}% of p50): "
            "the machine was busy; figures are rough") if busy else None


def fp16_note(bench: BenchReport, second_precision: str) -> str | None:
    """Why a float16 second model is not faster, when it is not (else None)."""
    slower = bench.ratio is not None and bench.ratio.difference != "faster"
    return FP16_SLOWER if slower and second_precision == "float16" else None
