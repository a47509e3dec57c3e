"""The children onnxport starts ask glibc's malloc for transparent huge pages and to keep their big
blocks (util/malloc_tuning.py); the process that starts them is left as it is."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from onnxport.core.util.child_call import call_in_child
from onnxport.core.util.malloc_tuning import SETTING, SETTINGS, is_tuned, tuned_environ

from . import child_functions as f

linux_glibc = pytest.mark.skipif(not sys.platform.startswith("linux")
                                 or not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"),
                                 reason="glibc tunables")


def test_the_settings_join_the_tunables_and_the_users_own_values_stand():
    assert tuned_environ({})["GLIBC_TUNABLES"] == SETTING
    assert tuned_environ({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})["GLIBC_TUNABLES"] == (
        f"glibc.malloc.arena_max=2:{SETTING}")
    users = "glibc.malloc.hugetlb=0:glibc.malloc.mmap_max=4"
    assert tuned_environ({"GLIBC_TUNABLES": users})["GLIBC_TUNABLES"] == (
        f"{users}:glibc.malloc.trim_threshold={SETTINGS['glibc.malloc.trim_threshold']}")
    assert is_tuned(tuned_environ({"GLIBC_TUNABLES": users}))
    assert is_tuned({"GLIBC_TUNABLES": SETTING}) and not is_tuned({"GLIBC_TUNABLES": "glibc.malloc.hugetlbx=1"})
    assert not is_tuned({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"})  # a process tuned by an older onnxport


_PROBE = """
import os, numpy as np
big = np.ones(64 << 20, np.uint8)  # past glibc's mmap threshold: a mapping of its own
start = big.ctypes.data
flags = ""
with open("/proc/self/smaps") as smaps:
    inside = False
    for line in smaps:
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= start < hi
        elif inside and line.startswith("VmFlags:"):
            flags = line
print("tuned", os.environ.get("GLIBC_TUNABLES"), " hg " in flags + " ", flush=True)
"""


@linux_glibc
def test_a_process_started_tuned_asks_malloc_for_huge_pages():
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    done = subprocess.run([sys.executable, "-c", _PROBE], env=tuned_environ(env), capture_output=True, text=True,
                          timeout=600, check=True)
    assert done.stdout.split("\n")[0] == f"tuned {SETTING} True"  # glibc madvised the block (VmFlags hg)


_REUSE = """
import numpy as np
def mapped(address):
    with open("/proc/self/maps") as maps:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= address < hi:
                return True
    return False
big = np.ones(64 << 20, np.uint8)  # past glibc's default mmap threshold
address = big.ctypes.data
del big
kept = mapped(address)
again = np.ones(64 << 20, np.uint8)
print(kept, again.ctypes.data == address)
"""


@linux_glibc
def test_tuned_a_freed_big_block_stays_mapped_and_is_reused():
    """Untuned, glibc unmaps a freed 64 MB block (the next one is mapped and faulted in anew);
    tuned, it stays in the heap, mapped, and the next block of that size is the same memory."""
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}

    def reuse(extra: dict[str, str]) -> str:
        done = subprocess.run([sys.executable, "-c", _REUSE], env={**env, **extra}, capture_output=True, text=True,
                              timeout=600, check=True)
        return done.stdout.strip()

    assert reuse(tuned_environ({})) == "True True"
    assert reuse({}).startswith("False ")  # untuned: the freed block left the address space


@linux_glibc
def test_the_app_s_children_start_tuned(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert call_in_child(f.environment_value, "GLIBC_TUNABLES") == SETTING
