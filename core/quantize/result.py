"""What `quantize` returns: the file written, sizes, the nodes kept in float, the validation report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from onnxport.core.evaluate.validate import ValidationReport
from onnxport.core.util.text import human_size


@dataclass
class QuantizeResult:
    path: Path
    data_path: Path | None
    mode: str
    size_bytes: int
    source_path: Path
    source_size_bytes: int
    kept_float_nodes: list[str]  # kept in float by the accuracy-target loop
    excluded_nodes: list[str]  # kept in float because the caller asked
    options: dict
    attempts: list[dict] = field(default_factory=list)
    target: float | None = None
    target_met: bool | None = None
    validation: ValidationReport | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    int8_path: str | None = None  # "int8 path: avx2 (no VNNI) -> 7-bit weights" (int8 modes)
    search: dict = field(default_factory=dict)  # what the accuracy search measured (search.py)

    @property
    def size_ratio(self) -> float:
        return self.size_bytes / self.source_size_bytes if self.source_size_bytes else 0.0

    def to_dict(self) -> dict:
        return {
            "path": str(self.path), "data_path": str(self.data_path) if self.data_path else None,
            "mode": self.mode, "size_bytes": self.size_bytes, "source_path": str(self.source_path),
            "source_size_bytes": self.source_size_bytes, "size_ratio": round(self.size_ratio, 4),
            "kept_float_nodes": self.kept_float_nodes, "excluded_nodes": self.excluded_nodes,
            "options": self.options, "target": self.target, "target_met": self.target_met,
            "attempts": [{**a, "min_cosine": round(a["min_cosine"], 6)} for a in self.attempts],
            "validation": self.validation.to_dict() if self.validation else None,
            "notes": self.notes, "seconds": round(self.seconds, 3), "int8_path": self.int8_path,
            "search": self.search, "held_out": self.held_out(),
        }

    def held_out(self) -> dict | None:
        """The verdict's figures: the held-out inputs, the worst output's cosine and its spread per sample."""
        if self.validation is None or not self.validation.outputs:
            return None
        worst = min(self.validation.outputs, key=lambda o: o.cosine)
        return {"inputs": self.validation.inputs, "output": worst.name, "cosine": round(worst.cosine, 6),
                "per_sample": worst.samples, "passed": self.validation.passed if self.target is not None else None}

    def summary_lines(self) -> list[str]:
        lines = [f"wrote {self.path}: {self.mode}, {human_size(self.size_bytes)} "
                 f"({100 * self.size_ratio:.0f}% of {human_size(self.source_size_bytes)}), {self.seconds:.1f} s"]
        if self.kept_float_nodes:
            lines.append(f"  kept in float to reach cosine >= {self.target}: {', '.join(self.kept_float_nodes)}")
        if self.excluded_nodes:
            lines.append(f"  excluded on request: {', '.join(self.excluded_nodes)}")
        lines += [f"  note: {n}" for n in self.notes]
        if self.validation is not None:
            lines += ["  " + line for line in self.validation.summary_lines(verdict=self.target is not None)]
        return lines
