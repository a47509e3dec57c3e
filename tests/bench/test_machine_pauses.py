"""The benchmark's reference for GUI stalls (bench/machine_pauses.py): the part of a GUI stall
during which an idle reference process (pinned to the GUI thread's CPU, or the GUI thread's Qt
twin) was late too is the machine's, the rest is the app's."""

from __future__ import annotations

import os
import signal
import threading
import time

from bench.machine_pauses import BEAT_MS, TWIN, ReferenceBeat, steal_ms


def _reference_with(gaps, cpus=(0, 1)):
    ref = ReferenceBeat.__new__(ReferenceBeat)  # the arithmetic alone, no beating processes
    ref.gaps, ref.cpus, ref.procs, ref.files, ref.sources, ref.units = list(gaps), list(cpus), [], [], [], {}
    return ref


def test_the_machine_s_share_of_a_stall_is_taken_out():
    beat = BEAT_MS / 1000
    gui_gap = [(10.210, 0.210, frozenset())]  # the beat due at 10.010 came at 10.210 (a 200 ms stall); CPUs not known
    # the references on both CPUs were overdue together from 10.050 to 10.190: the app's share is 60 ms
    ref = _reference_with([(0, 10.190, 0.150), (1, 10.200, 0.170)])
    assert abs(ref.paused_during(10.0 + beat, 10.210) - 0.140) < 1e-9
    assert ref.app_stall_ms(gui_gap, 200.0, 16.0) == 60.0
    # one CPU's reference alone late: the GUI thread may have been on the other; nothing taken out
    assert _reference_with([(0, 10.190, 0.150)]).app_stall_ms(gui_gap, 200.0, 16.0) == 200.0
    # only the stretch when both were overdue: 10.050-10.100 (50 ms)
    ref = _reference_with([(0, 10.190, 0.150), (1, 10.100, 0.100)])
    assert ref.app_stall_ms(gui_gap, 200.0, 16.0) == 150.0
    # a machine pause at another time takes nothing out
    assert _reference_with([(0, 20.5, 0.3), (1, 20.5, 0.3)]).app_stall_ms(gui_gap, 200.0, 16.0) == 200.0
    # no gap past a frame: the raw stall stands
    assert _reference_with([]).app_stall_ms([], 12.5, 16.0) == 12.5


def test_each_gap_s_app_part_is_given_with_its_end():
    """What decoder_app_bench uses to find the gap that holds the app's share (and the GUI
    thread's CPU time in it)."""
    gaps = [(10.210, 0.210, frozenset()), (12.050, 0.050, frozenset())]
    ref = _reference_with([(0, 10.190, 0.150), (1, 10.200, 0.170)])  # both overdue 10.050-10.190
    (end1, app1), (end2, app2) = ref.app_parts(gaps)
    assert (end1, end2) == (10.210, 12.050)
    assert abs(app1 - 0.060) < 1e-9 and abs(app2 - 0.040) < 1e-9
    assert ref.app_stall_ms(gaps, 200.0, 16.0) == 60.0
    assert ref.app_parts([]) == []


def test_the_reference_on_the_gui_thread_s_cpu_counts_and_every_stretch_of_it():
    on_cpu0 = [(10.210, 0.210, frozenset({0}))]  # the GUI thread was on CPU 0 at both ends of the gap
    # CPU 0's reference overdue 10.030-10.080 and 10.130-10.200: 120 ms of the 200 are the machine's
    ref = _reference_with([(0, 10.080, 0.060), (0, 10.200, 0.080)])
    assert abs(ref.paused_during(10.010, 10.210, frozenset({0})) - 0.120) < 1e-9
    assert ref.app_stall_ms(on_cpu0, 200.0, 16.0) == 80.0
    # the other CPU's reference late: nothing taken out
    assert _reference_with([(1, 10.200, 0.190)]).app_stall_ms(on_cpu0, 200.0, 16.0) == 200.0
    # the thread moved between CPUs 0 and 1: only where both were overdue (10.130-10.200)
    moved = [(10.210, 0.210, frozenset({0, 1}))]
    ref = _reference_with([(0, 10.080, 0.060), (0, 10.200, 0.080), (1, 10.200, 0.080)])
    assert ref.app_stall_ms(moved, 200.0, 16.0) == 130.0
    # CPUs unknown (a reference on a CPU it has not): every reference must have been overdue
    assert _reference_with([(0, 10.200, 0.190)]).app_stall_ms([(10.210, 0.210, frozenset({5}))], 200.0, 16.0) == 200.0


def test_the_twin_s_lateness_counts_wherever_the_gui_thread_was_and_no_stretch_twice():
    moved = [(10.210, 0.210, frozenset({0, 1}))]  # the GUI thread moved between CPUs 0 and 1
    # a VM-wide pause: CPU 0's reference overdue 10.010-10.190, CPU 1's only 10.130-10.190 (it ran
    # in between), the twin 10.030-10.190: 160 ms are the machine's, not 60
    ref = _reference_with([(0, 10.190, 0.190), (1, 10.190, 0.070), (TWIN, 10.190, 0.170)])
    assert abs(ref.paused_during(10.010, 10.210, frozenset({0, 1})) - 0.160) < 1e-9
    assert ref.app_stall_ms(moved, 200.0, 16.0) == 40.0
    assert _reference_with([(0, 10.190, 0.190), (1, 10.190, 0.070)]).app_stall_ms(moved, 200.0, 16.0) == 140.0
    # the twin late at another time takes nothing out, and is not a pinned reference
    ref = _reference_with([(TWIN, 20.5, 0.3)])
    assert ref.app_stall_ms(moved, 200.0, 16.0) == 200.0
    assert ref.worst_ms(20.0, 21.0) == 0.0 and ref.worst_ms(20.0, 21.0, [TWIN]) == 290.0


def test_the_slowdown_is_the_work_units_cost_in_a_gap_over_their_usual_cost():
    ref = _reference_with([])
    usual = [(10.0 + 0.02 * i, 0.0003) for i in range(50)]
    ref.units = {0: usual + [(11.05, 0.0012), (11.07, 0.0009)], 1: usual + [(11.05, 0.0003)]}
    assert abs(ref.slowdown(11.03, 11.06, frozenset({0})) - 3.5) < 1e-9  # (1.2 + 0.9) / 2 ms over the usual 0.3
    assert abs(ref.slowdown(11.03, 11.06, frozenset({1})) - 1.0) < 1e-9  # the other CPU ran at its usual speed
    assert abs(ref.slowdown(11.03, 11.06) - 3.5) < 1e-9  # CPUs not known: the slower
    assert abs(ref.slowdown(10.1, 10.15) - 1.0) < 1e-9
    assert ref.slowdown(30.0, 30.1) is None  # no unit then: not known


def _collect_until(ref: ReferenceBeat, enough, what: str) -> None:
    """Read the references' files until `enough()` holds: waiting for what they write, with a
    bound against a hang (not a measurement)."""
    give_up = time.monotonic() + 300
    while True:
        ref._collect(time.perf_counter())
        if enough():
            return
        assert time.monotonic() < give_up, f"no {what} within 5 minutes"


def test_references_beat_on_every_cpu_with_the_twin_and_steal_is_read():
    ref = ReferenceBeat()
    try:
        assert len(ref.procs) == 2 * len(ref.cpus) + 1 and all(path.exists() for path in ref.files)  # all beating
        _collect_until(ref, lambda: set(ref.units) == set(ref.cpus) and all(len(u) >= 3 for u in ref.units.values()),
                       "three work units on every CPU")
        assert all(p.poll() is None for p in ref.procs) and ref.procs
        assert all(c > 0 for u in ref.units.values() for _e, c in u)
        assert ref.worst_ms(0.0, time.perf_counter()) >= 0.0
        assert ref.slowdown(0.0, time.perf_counter()) > 0  # from the units read
    finally:
        ref.close()
    assert all(p.poll() is not None for p in ref.procs)
    assert steal_ms() >= 0.0


def test_a_held_up_reference_reports_its_gap_without_a_thread_in_this_process():
    """References held up (SIGSTOP) for at least 150 ms report a gap about that long (the last
    beat may come just before the stop), ending after they went on; how much longer the machine
    made it is not asserted."""
    threads = threading.active_count()
    ref = ReferenceBeat()
    try:
        assert threading.active_count() == threads  # nothing here takes the measured process's GIL
        twin = ref.procs[ref.sources.index(TWIN)]
        t0 = time.perf_counter()
        for proc in (ref.procs[0], twin):  # the reference on the first CPU and the twin held up 150 ms
            os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(0.15)  # the stall made (not a wait for an outcome)
        going_on = time.perf_counter()
        for proc in (ref.procs[0], twin):
            os.kill(proc.pid, signal.SIGCONT)

        def reported(source) -> bool:
            return any(s == source and end >= going_on and gap >= 0.14 for s, end, gap in ref.gaps)

        _collect_until(ref, lambda: reported(ref.cpus[0]) and reported(TWIN), "gap reported by both")
        worst = ref.worst_ms(t0, time.perf_counter())
        assert worst >= 140 - BEAT_MS
        assert ref.worst_ms(t0, time.perf_counter(), [TWIN]) >= 140 - BEAT_MS
        assert {ref.cpus[0], TWIN} <= {source for source, end, _gap in ref.gaps if end >= t0}
    finally:
        ref.close()


def test_the_heartbeat_knows_the_cpu_its_thread_runs_on():
    from bench.gui_bench import CpuProbe

    allowed, probe = os.sched_getaffinity(0), CpuProbe()
    try:
        for cpu in sorted(allowed)[:2]:
            os.sched_setaffinity(0, {cpu})
            assert probe() == cpu  # the same open file, read again
    finally:
        os.sched_setaffinity(0, allowed)
