"""glibc's malloc keeps its big blocks, on transparent huge pages, in the CLI and the app's children.

Why: validating and quantizing allocate and free gigabytes (ONNX Runtime copies every
initializer into each session it builds, the quantizer copies every weight), and glibc serves
blocks over 32 MB with fresh `mmap`s that the kernel faults in and zeroes 4 KB at a time, and
unmaps again on free: on the 1B decoder's early exit, system time was 55 of the 81 s of
`onnxport export --quantize dynamic --validate`, mostly page faults. Two settings (`SETTINGS`):

- `glibc.malloc.hugetlb=1`: glibc asks for 2 MB pages (transparent huge pages in `madvise` mode,
  Debian's default and these VMs', give them only to memory that asks). The command took 52 s
  (system time 29 s), the same peak RSS.
- `glibc.malloc.mmap_max=0` and a trim threshold past any heap: big blocks come from the heap
  and a freed one is reused as it is, instead of being unmapped and faulted in anew. Run pinned to
  one core at nice 10, as the app runs its children, five interleaved pairs: 45-48 s against
  52-61 s (system time 19-22 s against 27-34 s); peak RSS 5.89-6.49 GB against 5.76 GB. The host
  stole 20-70 ms of the VM's CPU time during a run against 70-340 ms, and an idle reference
  process on the app's core was late by 0-81 ms in all against 46-605 ms (bench/machine_pauses.py).
  On a VM, a page the guest frees is handed back to the host (free page reporting, on here) and
  faulted in by it again when reused: less churn is fewer host pauses of the app's window
  (bench/decoder_app_bench.py, quantize phase).

glibc reads its tunables when a process starts, so:
- `tuned_environ()` is the environment the app's and CLI's children start with;
- `reexec_tuned()` restarts the current process once with it (the CLI's entry point calls it
  first thing; a no-op when already tuned, or off glibc).
A user's own value of any of these tunables stands.

Not the app's own process: it wants latency, not throughput. A huge page is zeroed (and may be
compacted for) in the thread that first touches it, under the GIL the GUI thread then waits for:
gui_bench's after-open stall at 100k nodes was 41-102 ms tuned, 5-43 ms not (two runs each,
interleaved). `onnxport gui` starts the app untuned; its heavy children start tuned.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

SETTINGS = {
    "glibc.malloc.hugetlb": "1",  # 2 MB pages for what malloc maps
    "glibc.malloc.mmap_max": "0",  # no block mapped alone: big blocks from the heap, kept when freed
    "glibc.malloc.trim_threshold": str(1 << 40),  # the heap's free top kept too
}
SETTING = ":".join(f"{name}={value}" for name, value in SETTINGS.items())


def _named(env: Mapping[str, str]) -> set[str]:
    return {part.split("=", 1)[0] for part in env.get("GLIBC_TUNABLES", "").split(":") if part}


def is_tuned(env: Mapping[str, str]) -> bool:
    """Whether `env` already names every tunable of ours (our value, or the user's own)."""
    return SETTINGS.keys() <= _named(env)


def tuned_environ(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with our tunables it does not name added to GLIBC_TUNABLES."""
    env = dict(os.environ if env is None else env)
    named = _named(env)
    ours = [f"{name}={value}" for name, value in SETTINGS.items() if name not in named]
    if ours:
        env["GLIBC_TUNABLES"] = ":".join(p for p in (env.get("GLIBC_TUNABLES", ""), *ours) if p)
    return env


def _on_glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (AttributeError, ValueError, OSError):
        return False


def reexec_tuned() -> None:
    """Start this process again, the same command line, with `tuned_environ()`; returns only when
    there is nothing to do. Call it before anything else runs (nothing is undone by the exec)."""
    if sys.platform != "linux" or is_tuned(os.environ) or not _on_glibc():
        return
    argv = [sys.executable, *sys.orig_argv[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, argv, tuned_environ())
    except OSError:
        pass  # carry on untuned: slower, never wrong
