"""startup_bench's inspect bar: `onnxport inspect` of the 90 MB model against `onnx.load` of it,
medians of the same rounds (no timing here: rows are given)."""

from __future__ import annotations

import pytest

from bench import startup_bench as sb


def rows(inspect_median: float) -> list[dict]:
    def row(name: str, median: float) -> dict:
        return {"command": name, "median_s": median, "best_s": median * 0.8, "heavy_imports": [], "error": None}

    return [row(sb.REFERENCE, 0.25), row("onnxport validate", 1.0), row(sb.LOAD_90MB, 0.3),
            row(sb.INSPECT_90MB, inspect_median)]


def test_the_inspect_bar_is_the_ratio_of_medians():
    bar = next(name for name in sb.bars(rows(0.3)) if name.startswith("inspect 90 MB"))
    assert sb.inspect_vs_load(rows(0.36))["median"] == pytest.approx(1.2)
    assert sb.bars(rows(0.36))[bar] and not sb.bars(rows(0.42))[bar]
    assert all(sb.bars(rows(0.36)).values())  # onnx.load is the reference, not a command with a bar


def test_children_run_with_bytecode_cached(monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = sb.child_env(EXTRA="1")
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["PYTHONPYCACHEPREFIX"].endswith("pycache")
    assert env["EXTRA"] == "1"
