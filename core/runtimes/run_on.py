"""Run one model on several execution providers, each in its runtime's environment, against CPU.

`run_on_providers(model, providers)`: the feeds (from a file, or generated and fitted to the model
as validate and bench do), then per provider a child in the environment that has it (discovery.py)
opens the model there (probe.py: placement, load time, outputs). CPU in onnxport's own environment
is always first: its outputs are the reference, its latency the baseline. Each provider's outputs
are compared with CPU's per output (cosine, max abs diff; `thresholds`: cosine >= 0.999 unless
given). Latency: every child times its own runs (`repeat` per sample, calibrated as bench does),
the providers interleaved in palindromic blocks (0 1 2 2 1 0: a linear drift cancels), so each
one's ratio to CPU is paired block by block, with its 95% interval. A provider that cannot run
the model (too old a runtime, a provider that did not start) is reported failed with ORT's reason.
"""

from __future__ import annotations

import io
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from onnxport.core.evaluate.compare import OutputStats, Thresholds, output_kinds
from onnxport.core.evaluate.feeds import FeedsLike
from onnxport.core.evaluate.first_run import fitted_feeds
from onnxport.core.evaluate.timing import (
    SAMPLE_SECONDS,
    TRIES,
    paired_ratio,
    percentiles_ms,
    repeat_ladder,
    spread_pct,
)
from onnxport.core.graph.uses import walk_bodies
from onnxport.core.io.light_read import load_light_graph
from onnxport.core.io.model_io import check_model_file
from onnxport.core.runtimes.discovery import PROBE, Runtime, find_runtimes, runtime_for
from onnxport.core.runtimes.names import CPU
from onnxport.core.runtimes.precision import precision
from onnxport.core.runtimes.report import ProviderResult, ProvidersReport
from onnxport.core.util.child_call import Child, in_child
from onnxport.core.util.errors import Cancelled, OnnxportError
from onnxport.core.util.progress import CancelToken, ProgressFn, Reporter

DEFAULT_THRESHOLDS = Thresholds(min_cosine=0.999)
MAX_FEEDS = 4  # batches compared per provider
MIN_BLOCKS = 6  # as bench: the fewest paired blocks whose interval reaches 95%
MAX_BLOCKS = 2000
TIMING_CAP = 1000  # runs per timed sample, at most


def run_on_providers(model: str | Path, providers: list[str], *, options: Mapping[str, dict] | None = None,
                     inputs: FeedsLike = None, dim_sizes: Mapping[str, int] | None = None,
                     shapes: Mapping[str, tuple[int, ...]] | None = None, thresholds: Thresholds | None = None,
                     seconds: float = 1.0, threads: int | None = None, runtimes: list[Runtime] | None = None,
                     progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> ProvidersReport:
    """See the module docstring. `providers`: full names (names.provider_names); `options`:
    provider options per provider; `seconds`: timing per provider (0: no timing)."""
    if in_child():  # it starts a child per runtime: children start no process (util/child_call.py)
        raise OnnxportError("running on providers starts processes of its own: run it from the CLI or the app's worker")
    report = Reporter(progress, cancel)
    model = Path(model).absolute()
    providers = list(dict.fromkeys([CPU, *providers]))
    runtimes = runtimes if runtimes is not None else find_runtimes()
    chosen = {p: runtime_for(p, runtimes) for p in providers}  # a missing one: one line, before any work
    graph = load_light_graph(model)
    check_model_file(model)  # its external data confined to its folder, before any ORT reads it
    report(0.02, "inputs")
    feeds = fitted_feeds(model, inputs, model=graph, count=2, cancel=report.token)
    batch = [f for _, f in zip(range(MAX_FEEDS), feeds)]
    described = "generated inputs" if feeds.generated else feeds.description
    kinds, in_file = output_kinds(graph), node_count(graph)
    thresholds = thresholds or DEFAULT_THRESHOLDS
    children: dict[str, Child] = {}
    try:
        results, outputs = [], {}
        for i, provider in enumerate(providers):
            report(0.05 + 0.4 * i / len(providers), f"opening on {provider}")
            runtime, given = chosen[provider], dict((options or {}).get(provider, {}))
            result = ProviderResult(provider, runtime.python, runtime.ort_version, runtime.package, given,
                                    nodes_in_file=in_file)
            result.precision, result.reduced_precision = precision(provider, given, runtime.cpu_flags)
            child = Child(runtime.python, label=f"{provider} in {runtime.python}")
            try:
                outputs[provider] = _open(child, result, model, batch, threads, report.token)
                children[provider] = child
            except Cancelled:
                child.close()
                raise
            except OnnxportError as exc:
                child.close()
                result.error = exc.one_line()
            results.append(result)
        if CPU not in outputs:
            raise OnnxportError(f"{model.name}: the CPU reference did not run: {results[0].error}")
        for result in results[1:]:
            if result.error is None:
                result.outputs = compare(outputs[result.provider], outputs[CPU], kinds, thresholds)
        if seconds > 0:
            _time(results, children, seconds, report)
    finally:
        for child in children.values():
            child.close()
    report(1.0, "measured")
    notes = [] if not feeds.generated else ["inputs were generated: give real ones (--inputs) for a verdict on real data"]
    return ProvidersReport(str(model), f"{described} ({len(batch)} batch(es))", thresholds, results, notes)


def node_count(graph) -> int:
    """Nodes of a graph and of its control-flow bodies."""
    return len(graph.graph.node) + sum(len(body.node) for *_, body in walk_bodies(graph.graph))


def painted_node_names(model: str | Path, limit: int = 100_000) -> list[str]:
    """The names of the file's nodes a placement can be painted on (its main graph; Constant
    nodes left out: ONNX Runtime makes them initializers), at most `limit`."""
    graph = load_light_graph(Path(model)).graph
    return [n.name for n in graph.node if n.name and n.op_type != "Constant"][:limit]


def _packed(feeds: list[dict]) -> tuple[list[str], bytes]:
    names = list(feeds[0])
    buffer = io.BytesIO()
    np.savez(buffer, **{f"f{i}_{j}": np.asarray(feed[name]) for i, feed in enumerate(feeds) for j, name in enumerate(names)})
    return names, buffer.getvalue()


def _open(child: Child, result: ProviderResult, model: Path, feeds: list[dict], threads: int | None,
          cancel: CancelToken) -> list[list[np.ndarray]]:
    """Open the model in the child; fill `result` with what it says; the outputs per feed."""
    names, data = _packed(feeds)
    request = {"model": str(model), "provider": result.provider, "options": result.options, "inputs": names,
               "feeds": len(feeds), "threads": threads}
    child.start_call(f"{PROBE}:open_model", request, data)
    meta, packed = None, None
    while (message := child.receive(cancel)) is not None:
        if isinstance(message, dict):
            meta = message
        else:
            packed = message
    if meta is None or packed is None:
        raise OnnxportError(f"{result.provider}: the runtime gave no outputs")
    placed = meta["placement"]
    result.load_s, result.ran, result.ort_options = meta["load_s"], meta["ran"], meta["options"]
    result.nodes_partitioned, result.nodes_on_provider = placed["partitioned"], placed["on_provider"]
    result.nodes_on_cpu, result.cpu_nodes = placed["on_cpu"], placed["cpu_nodes"]
    arrays = np.load(io.BytesIO(packed), allow_pickle=False)
    count = len(meta["outputs"])
    return [[(meta["outputs"][k], arrays[f"o{i}_{k}"]) for k in range(count)] for i in range(len(feeds))]


def compare(got: list, want: list, kinds: dict[str, str], thresholds: Thresholds) -> list:
    """Per output of the reference: the comparison over every feed."""
    stats = {name: OutputStats(name, kind=kinds.get(name, "values")) for name, _ in want[0]}
    for got_feed, want_feed in zip(got, want):
        mine = dict(got_feed)
        for name, value in want_feed:
            stats[name].update(mine.get(name), value)
    return [s.result(thresholds) for s in stats.values()]


def _repeat(child: Child, cancel: CancelToken) -> int:
    """Runs per timed sample: as timing.calibrate_repeat, with the child timing its own runs."""
    for n in repeat_ladder(TIMING_CAP):
        best = min(child.call(f"{PROBE}:time_runs", {"repeat": n}, cancel=cancel) for _ in range(TRIES))
        if best >= SAMPLE_SECONDS:
            return n
    return TIMING_CAP


def _time(results: list[ProviderResult], children: dict[str, Child], seconds: float, report: Reporter) -> None:
    """p10/p50/p90 per provider, and each one's paired ratio to CPU, from interleaved blocks."""
    running = [r for r in results if r.provider in children and r.error is None]
    report(0.5, "calibrating timings")
    repeats = [_repeat(children[r.provider], report.token) for r in running]
    order = list(range(len(running))) + list(reversed(range(len(running))))
    times: list[list[float]] = [[] for _ in running]
    budget, started, blocks = seconds * len(running), time.perf_counter(), 0
    while blocks < MAX_BLOCKS and (blocks < MIN_BLOCKS or time.perf_counter() - started < budget):
        for k in order:
            child = children[running[k].provider]
            took = child.call(f"{PROBE}:time_runs", {"repeat": repeats[k]}, cancel=report.token)
            times[k].append(took / repeats[k])
        blocks += 1
        report(0.5 + 0.5 * min((time.perf_counter() - started) / budget, 1.0), f"timing ({blocks} blocks)")
    for k, result in enumerate(running):
        p = percentiles_ms(times[k])
        result.p10_ms, result.p50_ms, result.p90_ms = p["p10"], p["p50"], p["p90"]
        result.spread_pct = spread_pct(p["p10"], p["p50"], p["p90"])
        if k:
            result.ratio = paired_ratio(times[0], times[k]) if len(running) > 1 else None
