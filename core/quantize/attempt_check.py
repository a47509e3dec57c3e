"""Checks of the dynamic search's real attempts against the float model's outputs, computed once.

Why: each attempt used to run a full validation, loading and running the float model again.

Contract: `AttemptChecker(prepared, feeds, thresholds, workdir)` runs the float model once over
`feeds` (the search inputs: small) and keeps its outputs; `checker(dst, kept, attempts)` runs only
`dst`, appends the attempt's record (kept nodes, worst cosine and output, size, passed, failures)
to `attempts` and returns whether it passed; `last`: that attempt's outputs, per batch. `reference(n)`: the first `n` batches (adapted to
the float model) and its outputs on them, for the search (search.search_bench).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from onnxport.core.evaluate.compare import VALUES, OutputStats, Thresholds, output_kinds
from onnxport.core.evaluate.feeds import FeedSource
from onnxport.core.evaluate.runtime import adapt_feed, model_size, run, session
from onnxport.core.io.light_read import load_light_graph


class AttemptChecker:
    def __init__(self, prepared: Path, feeds: FeedSource, thresholds: Thresholds, workdir: Path) -> None:
        self.prepared, self.feeds, self.thresholds, self.workdir = prepared, feeds, thresholds, workdir
        self._batches: list[dict[str, np.ndarray]] | None = None
        self._outputs: list[list[np.ndarray]] = []
        self.names: list[str] = []
        self.kinds: dict[str, str] = {}
        self.last: list[list[np.ndarray]] = []

    def _load(self) -> list[dict[str, np.ndarray]]:
        if self._batches is None:
            graph = load_light_graph(self.prepared)
            self.names, self.kinds = [o.name for o in graph.graph.output], output_kinds(graph)
            sess = session(self.prepared, label="float model", workdir=self.workdir)
            self._batches = [adapt_feed(feed, sess) for feed in self.feeds]
            self._outputs = [run(sess, self.names, feed, label=self.prepared.name, hint=self.feeds.hint)
                             for feed in self._batches]
        return self._batches

    def reference(self, n: int) -> tuple[list[dict[str, np.ndarray]], list[list[np.ndarray]], list[str]]:
        batches = self._load()
        return batches[:n], self._outputs[:n], self.names

    def __call__(self, dst: Path, kept: list[str], attempts: list[dict]) -> bool:
        batches = self._load()
        sess = session(dst, label=f"quantized {dst.name}", workdir=self.workdir)
        stats = [OutputStats(n, self.kinds.get(n, VALUES)) for n in self.names]
        self.last = []
        for feed, want in zip(batches, self._outputs):
            got = run(sess, self.names, adapt_feed(feed, sess), label=dst.name, hint=self.feeds.hint)
            self.last.append(got)
            for s, g, w in zip(stats, got, want):
                s.update(g, w)
        results = [s.result(self.thresholds) for s in stats]
        passed = bool(results) and all(r.passed for r in results)
        attempts.append(attempt_record(dst, kept, results, passed,
                                       [f"{r.name}: {r.reason}" for r in results if not r.passed]))
        return passed


def attempt_record(dst: Path, kept, outputs, passed: bool, failures: list[str], **extra) -> dict:
    """One quantization attempt as the result and the report list it: the nodes kept in float, the
    worst output (anything with `.name` and `.cosine`), the file's size, the verdict."""
    worst = min(outputs, key=lambda o: o.cosine)
    return {"kept_float_nodes": list(kept), "min_cosine": worst.cosine, "worst_output": worst.name,
            "size_bytes": model_size(dst), "passed": passed, "failures": failures, **extra}
