"""Progress of `export --validate --quantize dynamic` is one monotonic bar naming its step
(issue 15, cut 8: no "[85%] done" before benchmarking, no 19% -> 100% jump)."""

from __future__ import annotations

import re

from onnxport.core.cli import export_cmd, main
from onnxport.core.cli.progress_line import StderrProgress
from onnxport.core.workflow.export_steps import WEIGHTS

from .test_cli_newcomer import eval_folder

LINE = re.compile(r"^\[\s*(\d+)%\] (.*)$")
MAX_STEP = 0.15  # the biggest jump between two reports, but inside the quantizer (see below)


def check_reports(reports: list[tuple[float, str]], steps: list[str], optional: tuple[str, ...] = ()) -> None:
    """Monotonic; every message names its step; each step once, in order (`optional` ones may be
    missing: the app shows at most a few reports a second); "done" only at the end.
    The quantizer reports coarsely between pre-processing and its validation (core/quantize), so
    a bigger jump may only land inside the quantizing step."""
    fractions = [f for f, _ in reports]
    assert fractions == sorted(fractions), "progress went back"
    for (a, _), (b, message) in zip(reports, reports[1:]):
        assert b - a <= MAX_STEP or message.startswith("quantizing: "), (a, b, message)
    assert reports[-1] == (1.0, "done") and all(m != "done" for _, m in reports[:-1])
    seen = [m.split(":")[0] for _, m in reports[:-1]]
    assert set(seen) <= set(WEIGHTS), seen
    runs = [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] != s]
    assert runs == [s for s in steps if s in runs] and set(steps) - set(runs) <= set(optional), runs


def test_export_validate_quantize_progress_is_monotonic_and_named(tmp_path, capsys, monkeypatch):
    model, ckpt = eval_folder(tmp_path, hidden=256, decisive=True)
    monkeypatch.setattr(export_cmd, "StderrProgress",
                        lambda quiet, verbose: StderrProgress(quiet, verbose, interval=0, delay=0))
    code = main([str(a) for a in ("export", model, "--checkpoint", ckpt, "--outputs", "logits,probabilities",
                                  "-o", tmp_path / "m.onnx", "--validate", "--quantize", "dynamic", "-v")])
    assert code == 0 and (tmp_path / "m.int8.onnx").is_file()
    lines = [LINE.match(line) for line in capsys.readouterr().err.splitlines() if line.startswith("[")]
    reports = [(int(m.group(1)) / 100, m.group(2)) for m in lines]
    check_reports(reports, ["exporting", "validating", "quantizing", "benchmarking", "writing the report"])


def test_export_leaves_the_interpreter_s_switch_interval_alone(tmp_path, monkeypatch):
    """A machine's tuning is the app's start-up's to set, not a command's: the export's copies
    (the early copy's thread, then the writer's) run at the caller's switch interval."""
    import sys

    from onnxport.core.export import early_copy, writer

    model, ckpt = eval_folder(tmp_path, hidden=64)
    seen = []
    real_copy = early_copy.copy_range
    for module in (early_copy, writer):  # the early copy's thread, then the writer's own copies
        monkeypatch.setattr(module, "copy_range", lambda *a: (seen.append(sys.getswitchinterval()), real_copy(*a))[1])
    before = sys.getswitchinterval()
    code = main([str(a) for a in ("export", model, "--checkpoint", ckpt, "--outputs", "logits", "-q",
                                  "--external-data", "always", "-o", tmp_path / "m.onnx")])
    assert code == 0 and seen and all(s == before for s in seen)
    assert sys.getswitchinterval() == before
