"""Bundled resources: the example eval model and checkpoint (built by scripts/make_example.py)."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent / "examples"


def example_files() -> list[Path]:
    """The bundled example: an eval model and its trained checkpoint."""
    return [EXAMPLES / "eval_model.onnx", EXAMPLES / "checkpoint"]
