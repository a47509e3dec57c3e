"""The per-provider report: where each provider ran the nodes, how accurate and how fast it was.

`ProvidersReport.to_dict()` is the contract scripts read (`{"providers": [...]}` in the JSON
report): per provider its full name, the runtime (its Python) and ONNX Runtime version, the nodes
it took of the graph ONNX Runtime partitions (`nodes_on_provider`, `nodes_on_cpu` fell back,
`nodes_in_file`), the outputs against the CPU reference (`cosine`, `max_abs`), `p50_ms` and
`load_s`, and for each but the reference its latency against CPU's, measured interleaved (a
median ratio with its 95% interval). `passed` is the accuracy verdict; a provider that could not
run the model carries `error` and fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onnxport.core.evaluate.compare import OutputComparison, Thresholds
from onnxport.core.evaluate.timing import RatioEstimate
from onnxport.core.runtimes.names import short_name


@dataclass
class ProviderResult:
    provider: str
    runtime: str  # the Python of the environment that ran it
    ort_version: str | None
    package: str | None = None
    options: dict = field(default_factory=dict)  # as given
    ort_options: dict = field(default_factory=dict)  # as ONNX Runtime reports them
    precision: str = "fp32"
    reduced_precision: bool | None = False
    nodes_in_file: int = 0
    nodes_partitioned: int = 0  # the graph ORT partitions, after its basic optimisations
    nodes_on_provider: int = 0
    nodes_on_cpu: int = 0
    cpu_nodes: list[str] = field(default_factory=list)  # the nodes that fell back, by name
    ran: dict = field(default_factory=dict)  # {provider: nodes} in ORT's profile, after all its optimisations
    outputs: list[OutputComparison] = field(default_factory=list)
    load_s: float | None = None
    p50_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    spread_pct: float | None = None
    ratio: RatioEstimate | None = None  # latency against CPU's
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and all(o.passed for o in self.outputs)

    def to_dict(self) -> dict:
        def r(value, digits=4):
            return None if value is None else round(value, digits)

        return {
            "provider": self.provider, "short_name": short_name(self.provider), "runtime": self.runtime,
            "ort_version": self.ort_version, "package": self.package, "options": self.options,
            "ort_options": self.ort_options, "precision": self.precision,
            "reduced_precision": self.reduced_precision, "nodes_on_provider": self.nodes_on_provider,
            "nodes_on_cpu": self.nodes_on_cpu, "nodes_in_file": self.nodes_in_file,
            "nodes_partitioned": self.nodes_partitioned, "cpu_nodes": self.cpu_nodes, "ran": self.ran,
            "outputs": [{"name": o.name, "cosine": o.cosine, "max_abs": o.max_abs_diff, "passed": o.passed,
                         "reason": o.reason} for o in self.outputs],
            "p50_ms": r(self.p50_ms), "p10_ms": r(self.p10_ms), "p90_ms": r(self.p90_ms),
            "spread_pct": r(self.spread_pct, 1), "load_s": r(self.load_s),
            "against_cpu": self.ratio.to_dict() | {"verdict": self.ratio.verdict()} if self.ratio else None,
            "passed": self.passed, "error": self.error,
        }

    def lines(self) -> list[str]:
        head = f"{short_name(self.provider)} ({self.provider}, ONNX Runtime {self.ort_version or '?'}"
        head += f", {self.runtime})" + (f" options {self.options}" if self.options else "")
        if self.error:
            return [f"  FAILED {head}: {self.error}"]
        lines = [f"  {'ok ' if self.passed else 'BAD'} {head}",
                 f"      nodes: {self.nodes_on_provider} of {self.nodes_partitioned} on it, {self.nodes_on_cpu} "
                 f"fell back to CPU ({self.nodes_in_file} in the file); computes in {self.precision}"]
        if self.cpu_nodes:
            lines.append(f"      on CPU: {', '.join(self.cpu_nodes[:8])}" + (" ..." if len(self.cpu_nodes) > 8 else ""))
        for o in self.outputs:
            lines.append(f"      {o.name}: cosine {o.cosine:.6f}, max abs {o.max_abs_diff:.3g}"
                         + ("" if o.passed else f" ({o.reason})"))
        if self.p50_ms is not None:
            lines.append(f"      p50 {self.p50_ms:.3f} ms (spread {self.spread_pct:.0f}% p10-p90), load {self.load_s:.2f} s"
                         + (f"; against CPU: {self.ratio.verdict()}" if self.ratio else ""))
        return lines


@dataclass
class ProvidersReport:
    model: str
    inputs: str
    thresholds: Thresholds
    results: list[ProviderResult]
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def failing(self) -> list[str]:
        return [short_name(r.provider) for r in self.results if not r.passed]

    def to_dict(self) -> dict:
        return {"model": self.model, "inputs": self.inputs, "reference": "CPUExecutionProvider (this environment)",
                "thresholds": self.thresholds.to_dict(), "passed": self.passed,
                "providers": [r.to_dict() for r in self.results], "notes": self.notes}

    def summary_lines(self) -> list[str]:
        verdict = "PASSED" if self.passed else f"FAILED ({', '.join(self.failing())})"
        lines = [f"providers {verdict} against CPU on {self.inputs}:"]
        for result in self.results:
            lines += result.lines()
        return lines + [f"  note: {n}" for n in self.notes]
