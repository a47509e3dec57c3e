"""JobRunner: one main job at a time with its outcome reported once; side jobs give the newest
answer only; nothing reaches a runner Qt has deleted. Jobs are gated with events, never timed."""

from __future__ import annotations

import threading

import pytest
import shiboken6
from PySide6.QtCore import QObject, QThreadPool
from PySide6.QtWidgets import QApplication

from onnxport.gui.jobs.runner import JobRunner

pytestmark = pytest.mark.gui
WAIT = 60.0  # seconds: a bound against a hang, not a measurement


def gated(gate: threading.Event, value):
    """A job that returns `value` once `gate` is set."""

    def run(progress, cancel):
        assert gate.wait(WAIT)
        return value

    return run


def recorder(runner: JobRunner) -> list[tuple]:
    seen: list[tuple] = []
    runner.started.connect(lambda name: seen.append(("started", name)))
    runner.message.connect(lambda text: seen.append(("message", text)))
    runner.failed.connect(lambda name, exc, details: seen.append(("failed", name, type(exc).__name__, details)))
    runner.ended.connect(lambda name, how: seen.append(("ended", name, how)))
    runner.finished.connect(lambda name: seen.append(("finished", name)))
    return seen


def test_one_main_job_at_a_time(qtbot):
    runner = JobRunner()
    seen = recorder(runner)
    results = []
    gate = threading.Event()
    first = runner.run("first", gated(gate, 41), results.append)
    assert first is not None and runner.busy and runner.job is first
    assert runner.run("second", gated(gate, 0), results.append) is None  # refused, said in the log
    assert ("message", "busy: first is running") in seen
    gate.set()
    qtbot.waitUntil(lambda: not runner.busy, timeout=300_000)
    assert results == [41]
    assert [s for s in seen if s[0] != "message"] == [("started", "first"), ("ended", "first", "returned"),
                                                      ("finished", "first")]
    assert runner.run("third", gated(gate, 43), results.append) is not None  # free again
    qtbot.waitUntil(lambda: not runner.busy, timeout=300_000)
    assert results == [41, 43]


def test_a_result_the_caller_cannot_use_is_the_jobs_failure(qtbot):
    runner = JobRunner()
    seen = recorder(runner)

    def unusable(result):
        raise ValueError(f"cannot show {result}")

    runner.run("open", lambda progress, cancel: "a model", unusable)
    qtbot.waitUntil(lambda: not runner.busy, timeout=300_000)
    failed = [s for s in seen if s[0] == "failed"]
    assert len(failed) == 1 and failed[0][1:3] == ("open", "ValueError") and "cannot show a model" in failed[0][3]
    assert [s for s in seen if s[0] == "ended"] == [("ended", "open", "errored")]


def test_an_error_in_the_job_is_reported_once(qtbot):
    runner = JobRunner()
    seen = recorder(runner)

    def broken(progress, cancel):
        raise OSError("disk gone")

    runner.run("export", broken, lambda result: pytest.fail("no result"))
    qtbot.waitUntil(lambda: not runner.busy, timeout=300_000)
    assert [s[:3] for s in seen if s[0] == "failed"] == [("failed", "export", "OSError")]
    assert [s for s in seen if s[0] == "ended"] == [("ended", "export", "errored")]


def test_cancel_ends_the_job_cancelled(qtbot):
    runner = JobRunner()
    seen = recorder(runner)
    running = threading.Event()

    def waits_for_cancel(progress, cancel):
        running.set()
        for _ in range(int(WAIT / 0.005)):
            cancel.check()
            threading.Event().wait(0.005)
        return "never"

    runner.run("export", waits_for_cancel, lambda result: pytest.fail("no result"))
    assert running.wait(WAIT)
    assert runner.cancel() is not None
    qtbot.waitUntil(lambda: not runner.busy, timeout=300_000)
    assert ("ended", "export", "cancelled") in seen and ("message", "export cancelled; nothing was written") in seen
    assert runner.cancel() is None  # nothing running


def test_side_jobs_give_the_newest_answer_only(qtbot):
    runner = JobRunner()
    answers, errors, returned = [], [], []

    def superseded_yet_answers(progress, cancel):  # stops early once cancelled, and still answers
        while not cancel.cancelled:
            threading.Event().wait(0.005)
        returned.append("old")
        return "old"

    new_gate = threading.Event()
    runner.side("plan", superseded_yet_answers, answers.append)
    runner.side("plan", gated(new_gate, "new"), answers.append)  # cancels the older plan
    runner.side("filter", lambda progress, cancel: "tree", answers.append)  # another name: its own newest
    new_gate.set()
    qtbot.waitUntil(lambda: not runner.side_jobs, timeout=300_000)
    assert returned == ["old"]  # the older plan answered (side jobs run one at a time: first)...
    assert sorted(answers) == ["new", "tree"]  # ...and its answer was dropped
    assert not runner.busy  # side jobs are not the main job

    def broken(progress, cancel):
        raise RuntimeError("no plan")

    runner.side("plan", broken, answers.append, errors.append)
    qtbot.waitUntil(lambda: not runner.side_jobs, timeout=300_000)
    assert [str(e) for e in errors] == ["no plan"]

    gate = threading.Event()
    runner.side("plan", gated(gate, "stale"), answers.append)
    runner.drop("plan")  # e.g. no output is checked any more
    gate.set()
    qtbot.waitUntil(lambda: not runner.side_jobs, timeout=300_000)
    assert "stale" not in answers


def test_nothing_reaches_a_deleted_runner(qtbot):
    owner = QObject()
    runner = JobRunner(owner)
    called = []
    gate = threading.Event()
    runner.run("open", gated(gate, 1), called.append)
    runner.side("plan", gated(gate, 2), called.append)
    runner.ended.connect(lambda *args: called.append(args))
    shiboken6.delete(owner)  # the window closed while its jobs still run
    assert not shiboken6.isValid(runner)
    gate.set()
    assert QThreadPool.globalInstance().waitForDone(300_000)
    for _ in range(5):
        QApplication.processEvents()
    assert called == []


def test_a_superseded_side_job_is_cancelled(qtbot):
    """A newer side job of the same name (or `drop`) sets the older one's cancel token: a core call
    that checks it stops early instead of computing an answer nobody will read."""
    runner = JobRunner()
    answers, seen_cancel = [], []
    running = threading.Event()

    def until_cancelled(progress, cancel):
        running.set()
        for _ in range(int(WAIT / 0.005)):
            if cancel.cancelled:
                seen_cancel.append(True)
            cancel.check()
            threading.Event().wait(0.005)
        return "finished anyway"

    old = runner.side("plan", until_cancelled, answers.append)
    assert running.wait(WAIT) and not old.cancel_requested
    new_gate = threading.Event()
    new = runner.side("plan", gated(new_gate, "new"), answers.append)
    assert old.cancel_requested and not new.cancel_requested
    qtbot.waitUntil(lambda: old not in runner.side_jobs, timeout=300_000)
    assert seen_cancel and answers == []  # stopped early: no answer at all
    other = runner.side("filter", gated(new_gate, "tree"), answers.append)  # another name: untouched
    assert not new.cancel_requested and not other.cancel_requested
    runner.drop("plan")
    assert new.cancel_requested and not other.cancel_requested
    new_gate.set()
    qtbot.waitUntil(lambda: not runner.side_jobs, timeout=300_000)
    assert answers == ["tree"]


def test_drop_all_cancels_every_side_job_in_flight(qtbot):
    """What the window does when it closes: no side job keeps a thread of the shared pool."""
    runner = JobRunner()
    answers, started = [], threading.Barrier(3)

    def until_cancelled(progress, cancel):
        started.wait(WAIT)
        while True:
            cancel.check()
            threading.Event().wait(0.005)

    jobs = [runner.side("plan", until_cancelled, answers.append),
            runner.side("types", until_cancelled, answers.append, serial=False)]  # both running at once
    started.wait(WAIT)
    runner.drop_all()
    assert all(job.cancel_requested for job in jobs)
    qtbot.waitUntil(lambda: not runner.side_jobs, timeout=300_000)
    assert answers == []


def test_the_next_job_can_start_from_the_result_handler(qtbot):
    """A window starts the next job the moment the previous one's result arrives (a test waiting
    for `loaded` then exporting did): the runner must not still say 'busy' then."""
    runner = JobRunner()
    started = []

    def on_result(result):
        started.append(runner.run("second", lambda progress, cancel: "two", lambda r: None))

    with qtbot.waitSignal(runner.finished, timeout=300_000):
        runner.run("first", lambda progress, cancel: "one", on_result)
    assert started and started[0] is not None
    qtbot.waitUntil(lambda: runner.job is None, timeout=300_000)


def test_side_jobs_run_with_the_cycle_collector_off(qtbot):
    """A full collection triggered inside a side job holds the GIL for tens of ms at 300k nodes
    (the GUI thread stalls): side jobs run under quiet_gc, and the collector is back after."""
    import gc

    runner = JobRunner()
    seen = []
    was = gc.isenabled()
    runner.side("plan", lambda progress, cancel: gc.isenabled(), seen.append)
    qtbot.waitUntil(lambda: bool(seen) and not runner.side_jobs, timeout=300_000)
    assert seen == [False]
    assert gc.isenabled() == was


def test_serial_side_jobs_of_every_runner_run_one_at_a_time(qtbot):
    """Two side jobs running Python at once made the GUI thread wait 65-140 ms for the GIL: the
    window's and the preview's side jobs share one lane; `serial=False` ones run beside it."""
    window_runner, preview_runner = JobRunner(), JobRunner()
    lock, overlaps, answers = threading.Lock(), [], []
    running = [0]

    def busy(name):
        def run(progress, cancel):
            with lock:
                running[0] += 1
                overlaps.append(running[0])
            threading.Event().wait(0.05)
            with lock:
                running[0] -= 1
            return name

        return run

    window_runner.side("plan", busy("plan"), answers.append)
    preview_runner.side("preview", busy("preview"), answers.append)
    window_runner.side("filter", busy("filter"), answers.append)
    gate = threading.Event()
    window_runner.side("types", gated(gate, "types"), answers.append, serial=False)
    qtbot.waitUntil(lambda: len(answers) == 3, timeout=300_000)
    assert max(overlaps) == 1 and sorted(answers) == ["filter", "plan", "preview"]
    gate.set()  # the shapes were waiting beside the lane all along
    qtbot.waitUntil(lambda: not window_runner.side_jobs, timeout=300_000)
    assert "types" in answers
