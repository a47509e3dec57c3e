"""The CLI fits pipes: with stderr not a terminal there are no progress lines unless -v; the
before/after table comes with -v (one line says so otherwise); -q silences progress everywhere."""

from __future__ import annotations

import io
import os

from onnxport.core.cli import bench_cmd, main, quantize_cmd
from onnxport.core.cli.progress_line import TABLE_HINT, TABLE_START, StderrProgress, brief

from .test_cli_quantize import fp32  # noqa: F401 - fixture


def report(progress: StderrProgress) -> None:
    for i in range(3):
        progress(i / 2, f"step {i}")


def test_progress_only_on_a_terminal_unless_verbose():
    piped = io.StringIO()
    report(StderrProgress(interval=0, delay=0, stream=piped))
    assert piped.getvalue() == ""
    report(StderrProgress(verbose=True, interval=0, delay=0, stream=piped))
    assert piped.getvalue().splitlines() == ["[  0%] step 0", "[ 50%] step 1", "[100%] step 2"]
    leader, follower = os.openpty()  # a real terminal
    with open(follower, "w") as tty, open(leader, "rb", buffering=0) as screen:
        assert tty.isatty()
        report(StderrProgress(interval=0, delay=0, stream=tty))
        quiet = StderrProgress(quiet=True, verbose=True, interval=0, delay=0, stream=tty)
        report(quiet)  # -q wins: nothing more on the terminal
        tty.write("end\n")
        tty.flush()
        shown = _read_until(screen, b"end")  # a pty hands its bytes over in pieces of its choosing
        lines = shown.replace(b"\r", b"").split(b"\n")
        assert lines[:3] == [b"[  0%] step 0", b"[ 50%] step 1", b"[100%] step 2"] and lines[3] == b"end"


def _read_until(screen, marker: bytes, seconds: float = 60.0) -> bytes:
    """What the terminal showed up to `marker` (read as it comes, within `seconds`)."""
    import select
    import time

    shown, deadline = b"", time.monotonic() + seconds
    while marker not in shown and time.monotonic() < deadline:
        if select.select([screen], [], [], 0.1)[0]:
            shown += screen.read(4096)
    return shown


def test_brief_keeps_the_table_for_verbose():
    lines = ["wrote x.onnx", TABLE_START, "  size  1 KB", "  ops   5"]
    assert brief(lines, verbose=True) == lines
    assert brief(lines, verbose=False) == ["wrote x.onnx", TABLE_HINT]
    assert brief(["wrote x.onnx"], verbose=False) == ["wrote x.onnx"]


def test_piped_quantize_and_bench_print_no_progress_and_no_table(fp32, tmp_path, capsys, monkeypatch):  # noqa: F811
    for command in (bench_cmd, quantize_cmd):  # report from the start (a terminal waits 1 s): runs here are short
        monkeypatch.setattr(command, "StderrProgress",
                            lambda quiet, verbose: StderrProgress(quiet, verbose, interval=0, delay=0))
    q = tmp_path / "int8.onnx"
    assert main(["quantize", str(fp32), "-o", str(q), "--mode", "dynamic", "--int8-path", "avx2"]) == 0
    out, err = capsys.readouterr()
    assert "wrote" in out and TABLE_START not in out.splitlines() and TABLE_HINT in out and "MatMulInteger" not in out
    assert not [line for line in err.splitlines() if line.startswith("[")]
    assert main(["bench", str(fp32), str(q), "--seconds", "0.2"]) == 0
    out, err = capsys.readouterr()
    assert "second vs first" in out and err == ""
    assert main(["bench", str(fp32), "--seconds", "0.2", "-v"]) == 0
    assert "] measur" in capsys.readouterr().err  # asked for: progress even through a pipe
    assert main(["quantize", str(fp32), "-o", str(tmp_path / "v.onnx"), "--mode", "dynamic", "-v"]) == 0
    out, err = capsys.readouterr()
    assert TABLE_START in out.splitlines() and "MatMulInteger" in out and "] loading fp32.onnx" in err
