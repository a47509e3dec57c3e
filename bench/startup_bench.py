"""Whole-process wall time of the CLI on the bundled example, against importing onnx + onnxruntime.

    python -m bench startup_bench [--runs 5]

A user feels the CLI as whole processes: interpreter start, imports, the work, exit. Each command
runs `--runs` times as its own process (round-robin, so the machine's noise spreads over all of
them); reported: the first run, the best and the median, and their ratios to the reference
`python -c "import onnx, onnxruntime"` of the same rounds. Commands on resources/examples: `--help`,
`inspect`, `export`, `validate`, `quantize --mode dynamic`; and `inspect` of a 90 MB BERT-like
float model (bench/bert_model.py, built here) against `onnx.load` of it. Children run with
bytecode cached (build/bench/pycache when PYTHONDONTWRITEBYTECODE is set), as installs have it.
Bars: validate <= 2.0 s (median); inspect 90 MB <= 1.3x onnx.load (medians); no torch,
transformers or PySide6 import (`-X importtime`); every command exits 0.
Writes build/bench/startup_bench.json; exit 1 if a bar is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path("build/bench")
EXAMPLE = Path(__file__).resolve().parent.parent / "resources" / "examples"
HEAVY = ("torch", "transformers", "PySide6")  # never needed to inspect/export/validate/quantize ONNX
VALIDATE_BAR_S = 2.0
REFERENCE = "python -c 'import onnx, onnxruntime'"
LOAD_90MB = "python -c 'import onnx; onnx.load(90 MB)'"
INSPECT_90MB = "onnxport inspect 90 MB"
INSPECT_BAR = 1.3  # inspect of the 90 MB model / onnx.load of it, medians of whole processes
BIG_MODEL = "bert_like.onnx"


def commands(folder: Path) -> dict[str, list[str]]:
    """name -> argv; `{i}` in an argv is replaced by the run's number (fresh output files)."""
    cli = str(Path(sys.prefix) / "bin" / "onnxport")
    model, checkpoint = str(EXAMPLE / "eval_model.onnx"), str(EXAMPLE / "checkpoint")
    exported = str(folder / "model.onnx")
    return {
        REFERENCE: [sys.executable, "-c", "import onnx, onnxruntime"],
        "onnxport --help": [cli, "--help"],
        "onnxport inspect": [cli, "inspect", model, "--checkpoint", checkpoint],
        "onnxport export": [cli, "export", model, "--checkpoint", checkpoint, "--outputs", "probabilities",
                            "-o", str(folder / "export_{i}.onnx")],
        "onnxport validate": [cli, "validate", exported, "--reference", model, "--checkpoint", checkpoint],
        "onnxport quantize --mode dynamic": [cli, "quantize", exported, "-o", str(folder / "int8_{i}.onnx"),
                                             "--mode", "dynamic"],
        LOAD_90MB: [sys.executable, "-c", f"import onnx; onnx.load({str(folder / BIG_MODEL)!r})"],
        INSPECT_90MB: [cli, "inspect", str(folder / BIG_MODEL)],
    }


def child_env(**extra: str) -> dict[str, str]:
    """The commands' environment: bytecode cached as an installed package has it (without it every
    run compiles onnxport's modules again, and not onnx's, which pip compiled)."""
    env = dict(os.environ, **extra)
    if env.pop("PYTHONDONTWRITEBYTECODE", None) is not None or sys.flags.dont_write_bytecode:
        env.setdefault("PYTHONPYCACHEPREFIX", str((OUT / "pycache").resolve()))
    return env


# Commands whose right answer on the example is a refusal: name -> (exit code, words in stderr).
EXPECTED_REFUSAL: dict[str, tuple[int, str]] = {}


def _unexpected(name: str, proc: subprocess.CompletedProcess) -> bool:
    if not proc.returncode:
        return False
    code, words = EXPECTED_REFUSAL.get(name, (None, None))
    return not (proc.returncode == code and words in proc.stderr)


def run_once(argv: list[str], i: int, env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    argv = [a.replace("{i}", str(i)) for a in argv]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env or child_env(), stdin=subprocess.DEVNULL)
    return time.perf_counter() - start, proc


def heavy_imports(argv: list[str], i: int) -> list[str]:
    """Top-level packages of HEAVY that the command imports (from `-X importtime`'s report)."""
    _, proc = run_once(argv, i, env=child_env(PYTHONPROFILEIMPORTTIME="1"))
    found = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            top = line.rsplit("|", 1)[1].strip().split(".")[0]
            if top in HEAVY:
                found.add(top)
    return sorted(found)


def measure(runs: int, folder: Path) -> list[dict]:
    cmds = commands(folder)
    _, proc = run_once(cmds["onnxport export"][:-1] + [str(folder / "model.onnx")], 0)  # what validate reads
    if proc.returncode:
        raise SystemExit(f"export of the bundled example failed: {proc.stderr.strip()[-300:]}")
    from bench.bert_model import write_bert_like

    write_bert_like(folder / BIG_MODEL)  # ~90 MB of inline float weights, ~450 nodes
    times: dict[str, list[float]] = {name: [] for name in cmds}
    failures: dict[str, str] = {}
    for i in range(runs):
        for name, argv in cmds.items():
            seconds, proc = run_once(argv, i)
            times[name].append(seconds)
            if _unexpected(name, proc) and name not in failures:
                failures[name] = f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or ['?'])[-1][:200]}"
    reference = times[REFERENCE]
    ref_best, ref_median = min(reference), statistics.median(reference)
    rows = []
    for name, argv in cmds.items():
        t = times[name]
        best, median = min(t), statistics.median(t)
        rows.append({"command": name, "argv": argv, "first_s": t[0], "best_s": best, "median_s": median,
                     "runs_s": [round(s, 3) for s in t], "best_vs_reference": best / ref_best,
                     "median_vs_reference": median / ref_median, "heavy_imports": heavy_imports(argv, runs),
                     "error": failures.get(name)})
    return rows


def inspect_vs_load(rows: list[dict]) -> dict[str, float]:
    """`onnxport inspect` of the 90 MB model over `onnx.load` of it: medians and bests."""
    inspect, load = (next(r for r in rows if r["command"] == name) for name in (INSPECT_90MB, LOAD_90MB))
    return {"median": inspect["median_s"] / load["median_s"], "best": inspect["best_s"] / load["best_s"]}


def bars(rows: list[dict]) -> dict[str, bool]:
    validate = next(r for r in rows if r["command"] == "onnxport validate")
    onnxport = [r for r in rows if r["command"] not in (REFERENCE, LOAD_90MB)]
    return {
        f"onnxport validate <= {VALIDATE_BAR_S} s (median, whole process)": validate["median_s"] <= VALIDATE_BAR_S,
        f"inspect 90 MB <= {INSPECT_BAR}x onnx.load (medians, whole processes)":
            inspect_vs_load(rows)["median"] <= INSPECT_BAR,
        f"no {'/'.join(HEAVY)} imported": not any(r["heavy_imports"] for r in onnxport),
        "every command ends as expected": not any(r["error"] for r in rows),
    }


def table(rows: list[dict]) -> str:
    lines = [("command", "first s", "best s", "median s", "best x ref", "median x ref", "heavy imports")]
    for r in rows:
        lines.append((r["command"], f"{r['first_s']:.3f}", f"{r['best_s']:.3f}", f"{r['median_s']:.3f}",
                      f"{r['best_vs_reference']:.2f}", f"{r['median_vs_reference']:.2f}",
                      ", ".join(r["heavy_imports"]) or "none"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    text = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
            for line in lines]
    text += [f"  FAILED {r['command']}: {r['error']}" for r in rows if r["error"]]
    return "\n".join(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench startup_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (round-robin)")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="startup_bench.") as tmp:
        rows = measure(max(args.runs, 1), Path(tmp))
    verdicts = bars(rows)
    print(f"{args.runs} runs each, whole processes ({sys.prefix}/bin/onnxport); reference: {REFERENCE}")
    print(table(rows))
    ratio = inspect_vs_load(rows)
    print(f"inspect 90 MB vs onnx.load: x{ratio['median']:.2f} (medians), x{ratio['best']:.2f} (bests)")
    for name, ok in verdicts.items():
        print(f"  {'ok  ' if ok else 'MISS'} {name}")
    data = {"runs": args.runs, "python": sys.version.split()[0], "reference": REFERENCE, "commands": rows,
            "inspect_90mb_vs_load": ratio, "bars": verdicts, "passed": all(verdicts.values())}
    (OUT / "startup_bench.json").write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {OUT / 'startup_bench.json'}")
    return 0 if data["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
