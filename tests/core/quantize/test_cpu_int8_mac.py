"""cpu_int8 reads macOS's CPU flags in process (sysctlbyname), starting no `sysctl` child: the
product's only children are its own Python (issue 28, item 3)."""

from __future__ import annotations

import subprocess

from onnxport.core.quantize import cpu_int8


def test_mac_flags_start_no_process(monkeypatch):
    def no_process(*args, **kwargs):
        raise AssertionError("a process was started")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    flags = cpu_int8._mac_flags()
    assert flags <= set(cpu_int8._MAC_FLAGS.values())

