"""What the machine itself did to every process during a benchmark phase: the reference for the
GUI thread's stalls.

Why: on the 2-vCPU VMs this app is measured on, the host pauses the whole VM now and then while
it is busy (steal time on both vCPUs at once; heartbeats in unrelated processes pinned to each
vCPU late by 60-300 ms at the same moments as the window's). A stall measured on the GUI thread
is the app's own only where such a reference was on time.

- `ReferenceBeat`: separate, idle processes beating every 10 ms like the GUI heartbeat
  (bench/gui_bench.py): a Python loop pinned to each CPU (the GUI thread may be on either when a
  vCPU is paused), and the GUI thread's twin, `TWIN`: a Qt application of its own, unpinned at
  the app's priority, whose 10 ms timer runs a Python slot as the heartbeat does, the app's window
  and jobs left out. `worst_ms(t0, t1)` is the pinned references' longest stall (gap minus
  period) in a window of `time.perf_counter()` (CLOCK_MONOTONIC, the same in every process on
  Linux), `worst_ms(t0, t1, [TWIN])` the twin's. They write their late beats to files read after
  a phase: a thread reading them in the measured process would take its GIL exactly when the VM is
  slowed (a reference reports then), and lengthen the very stalls it measures (seen with perf
  sched: reader threads waiting 45-78 ms for a CPU inside the GUI's 215 ms gap).
- `app_stall_ms(late, raw_ms, goal_ms)`: the GUI's longest stall once the time the machine held
  a thread like it up is taken out: each GUI gap past a frame (`late`: (end, seconds, CPUs the
  GUI thread was on at either end of the gap)) minus the time within it during which the twin
  was overdue, or the pinned references on those CPUs all were (on every CPU where the CPUs are
  not known). Every such stretch of the gap counts, because that is what a stolen vCPU looks
  like: perf sched showed the GUI thread alone on cpu0 through a 141 ms gap while cpu0's
  reference was late 48, 32 and 55 ms in turn and every task on cpu0 (the reference's 20 us loop
  too) "ran" whole 4 ms ticks: the host ran the vCPU in slivers. The twin is what a pinned
  reference cannot be: a thread that needs what the GUI thread needs per beat (Qt's event loop, a
  Python slot), moved between CPUs by the same scheduler. Without it, a GUI thread that moved to
  the other vCPU during a VM-wide pause kept 60-110 ms of it on the app's account (the pinned
  reference there was on time part of the gap: it was not queued behind the stolen one). Both
  stay conservative: a reference reports only its gaps past 20 ms, and the time the app waited
  for its own GIL, or behind its own threads, stays on its account (the twin is late only where
  the machine is: not once in the open, preview and export phases, where the app's worker is
  busiest).
- `slowdown(start, end)`: what a pause reference cannot see. The same Python work costs this VM
  1x-2x its usual CPU time from one second to the next, and 3x-5x now and then after a big child
  process exits (measured: a 13 ms unit of dict and string work, repeated every 10 ms in a
  process pinned to cpu0, took up to 34-119 ms of CPU within 3 s of a 4 GB child's exit on
  cpu1, against at most 21-28 ms before; its steal was not reported). A work reference pinned to
  each CPU (a ~0.3 ms unit every 20 ms, its CPU time per unit written) gives the factor on the
  GUI thread's CPUs during a gap: reported beside the app's share, not taken out of it.
- `steal_ms()`: the host's steal time so far, summed over the CPUs (/proc/stat; 0 elsewhere).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BEAT_MS = 10
REPORT_MS = 20  # gaps this long are reported by the reference process
TWIN = -1  # the "CPU" of the twin's gaps: any
WORK = -10  # the work reference pinned to CPU c writes its units as source WORK - c (not gaps)
WORK_PERIOD_MS = 20
STARTUP_S = 60  # the longest a reference may take to start beating

_BEATER = (
    "import os, sys, time\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "sys.stdout = open(sys.argv[2], 'w', buffering=1)\n"
    f"period, report = {BEAT_MS / 1000}, {REPORT_MS / 1000}\n"
    "last = time.perf_counter()\n"
    "while True:\n"
    "    time.sleep(period)\n"
    "    now = time.perf_counter()\n"
    "    if now - last > report:\n"
    "        print(f'{now:.4f} {now - last:.4f}', flush=True)\n"
    "    last = now\n"
)


_TWIN = (
    "import sys, time\n"
    "from PySide6.QtCore import QTimer\n"
    "from PySide6.QtWidgets import QApplication\n"
    "app = QApplication([])\n"
    f"period, report = {BEAT_MS}, {REPORT_MS / 1000}\n"
    "def beat():\n"
    "    global last\n"
    "    now = time.perf_counter()\n"
    "    if now - last > report:\n"
    "        print(f'{now:.4f} {now - last:.4f}', flush=True)\n"
    "    last = now\n"
    "timer = QTimer(interval=period, timeout=beat)\n"
    "timer.start()\n"
    "sys.stdout = open(sys.argv[2], 'w', buffering=1)  # the file appears once the loop is about to beat\n"
    "last = time.perf_counter()\n"
    "app.exec()\n"
)


_WORKER = (
    "import os, sys, time\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "sys.stdout = open(sys.argv[2], 'w', buffering=1)\n"
    f"period = {WORK_PERIOD_MS / 1000}\n"
    "def unit():  # dicts and strings, as a GUI slot's Python makes them: ~0.3 ms here\n"
    "    return len({f'n{i}': {'v': i, 's': str(i) * 3} for i in range(400)})\n"
    "while True:\n"
    "    time.sleep(period)\n"
    "    t = time.thread_time()\n"
    "    unit()\n"
    "    print(f'{time.perf_counter():.4f} {time.thread_time() - t:.6f}', flush=True)\n"
)


class ReferenceBeat:
    def __init__(self) -> None:
        self.gaps: list[tuple[int, float, float]] = []  # (cpu or TWIN, end, seconds), as read so far
        self.cpus = sorted(os.sched_getaffinity(0))
        self._dir = tempfile.TemporaryDirectory(prefix="onnxport-reference-")
        self.units: dict[int, list[tuple[float, float]]] = {}  # CPU -> (end, CPU seconds) of its work units
        self.sources = [*self.cpus, TWIN, *(WORK - cpu for cpu in self.cpus)]
        self.files = [Path(self._dir.name) / f"ref{source}.txt" for source in self.sources]
        self._read_bytes = [0] * len(self.files)
        self.procs = [subprocess.Popen([sys.executable, "-c", _BEATER, str(cpu), str(path)])
                      for cpu, path in zip(self.cpus, self.files)]
        twin_env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
        twin = self.sources.index(TWIN)
        self.procs.append(subprocess.Popen([sys.executable, "-c", _TWIN, "", str(self.files[twin])], env=twin_env))
        self.procs += [subprocess.Popen([sys.executable, "-c", _WORKER, str(cpu), str(path)])
                       for cpu, path in zip(self.cpus, self.files[twin + 1:])]
        self._wait_started()

    def _wait_started(self) -> None:
        """Until every reference beats (its file is there): starting Qt takes a CPU for a while,
        which must not fall into the first phase."""
        end = time.monotonic() + STARTUP_S
        while not all(path.exists() for path in self.files):
            if time.monotonic() > end or any(proc.poll() is not None for proc in self.procs):
                self.close()
                raise RuntimeError("a reference heartbeat did not start")
            time.sleep(0.02)

    def _collect(self, until: float) -> None:
        """Add the gaps the references wrote since the last call (whole lines only), once those
        that ended by `until` (perf_counter) have had 50 ms to arrive."""
        time.sleep(max(0.0, until + 0.05 - time.perf_counter()))
        for i, (source, path) in enumerate(zip(self.sources, self.files)):
            try:
                with open(path, "rb") as f:
                    f.seek(self._read_bytes[i])
                    text = f.read()
            except FileNotFoundError:
                continue
            whole = text[: text.rfind(b"\n") + 1]
            self._read_bytes[i] += len(whole)
            for line in whole.decode().splitlines():
                end, value = map(float, line.split())
                if source <= WORK:
                    self.units.setdefault(WORK - source, []).append((end, value))
                else:
                    self.gaps.append((source, end, value))

    def worst_ms(self, t0: float, t1: float, sources=None) -> float:
        """The longest stall of the references in `sources` (default: the pinned ones) that
        ended in [t0, t1]."""
        self._collect(t1)
        sources = set(self.cpus if sources is None else sources)
        gaps = [gap for source, end, gap in self.gaps if source in sources and t0 <= end <= t1 + 0.05]
        return round(max(0.0, max(gaps, default=0.0) * 1000 - BEAT_MS), 1)

    def _overdue(self, start: float, end: float) -> dict[int, list[tuple[float, float]]]:
        """Per reference, the stretches of [start, end] during which it was overdue."""
        overdue: dict[int, list[tuple[float, float]]] = {}
        for source, ref_end, gap in self.gaps:
            lo, hi = max(start, ref_end - gap + BEAT_MS / 1000), min(end, ref_end)
            if hi > lo:
                overdue.setdefault(source, []).append((lo, hi))
        return overdue

    def paused_during(self, start: float, end: float, cpus: frozenset[int] | None = None) -> float:
        """Seconds of [start, end] during which the twin was overdue, or the pinned references
        on every CPU of `cpus` (default: all) were at once."""
        overdue = self._overdue(start, end)
        cpus = sorted(cpus) if cpus else self.cpus
        stretches = overdue.get(cpus[0], [])  # one reference's gaps never overlap
        for cpu in cpus[1:]:
            stretches = [(max(a, c), min(b, d)) for a, b in stretches for c, d in overdue.get(cpu, [])
                         if min(b, d) > max(a, c)]
        return _covered(stretches + overdue.get(TWIN, []))

    def app_stall_ms(self, late: list[tuple[float, float, frozenset[int]]], raw_ms: float, goal_ms: float) -> float:
        """See the module docstring; gaps not in `late` stalled at most `goal_ms`. An item of `late`
        is (end, seconds, CPUs); no CPUs: not known."""
        parts = [p * 1000 for _end, p in self.app_parts(late)]
        return round(max(parts + [min(raw_ms, goal_ms)]), 1)

    def app_parts(self, late: list[tuple[float, float, frozenset[int]]]) -> list[tuple[float, float]]:
        """(end, the app's seconds) of each gap in `late`: its length past a beat, less the
        machine's time in it."""
        self._collect(max((end for end, _gap, _cpus in late), default=0.0))
        return [(end, gap - BEAT_MS / 1000 - self.paused_during(end - gap + BEAT_MS / 1000, end, cpus))
                for end, gap, cpus in late]

    def slowdown(self, start: float, end: float, cpus: frozenset[int] | None = None) -> float | None:
        """How many times its usual CPU time work took during [start, end] on the CPUs of `cpus`
        (default: all): per CPU, the mean of its work reference's units then over the median of
        all its units so far; the largest of those. None: no unit ended then."""
        self._collect(end)
        factors = []
        for cpu in sorted(cpus) if cpus else self.cpus:
            units = self.units.get(cpu, [])
            near = [c for t, c in units if start <= t <= end + WORK_PERIOD_MS / 1000]
            usual = sorted(c for _t, c in units)
            if near and usual[len(usual) // 2] > 0:
                factors.append(sum(near) / len(near) / usual[len(usual) // 2])
        return max(factors, default=None)

    def close(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self._dir.cleanup()


def _covered(stretches: list[tuple[float, float]]) -> float:
    """The length of the union of `stretches`."""
    total, reach = 0.0, float("-inf")
    for a, b in sorted(stretches):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def steal_ms() -> float:
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()  # "cpu user nice system idle iowait irq softirq steal ..."
    except OSError:
        return 0.0
    if fields[0] != "cpu" or len(fields) < 9:
        return 0.0
    return int(fields[8]) * 1000 / os.sysconf("SC_CLK_TCK")
