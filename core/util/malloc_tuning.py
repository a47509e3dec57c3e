"""glibc's malloc backs its big blocks with transparent huge pages in the CLI and the app's children.

Why: validating and quantizing allocate and free gigabytes (ONNX Runtime copies every
initializer into each session it builds, the quantizer copies every weight), and glibc serves
blocks over 32 MB with fresh `mmap`s that the kernel faults in and zeroes 4 KB at a time: on the
1B decoder's early exit, system time was 55 of the 81 s of `onnxport export --quantize dynamic
--validate`, mostly page faults. Where transparent huge pages are in `madvise` mode (Debian's
default, these VMs'), only memory that asks gets 2 MB pages, and glibc asks when its
`glibc.malloc.hugetlb=1` tunable is set: the same command then took 52 s (system time 29 s),
the same peak RSS. It also spares a VM's host the page-by-page faulting that made it pause the
app's window (bench/decoder_app_bench.py, quantize phase).

glibc reads its tunables when a process starts, so:
- `tuned_environ()` is the environment the app's and CLI's children start with;
- `reexec_tuned()` restarts the current process once with it (the CLI's entry point calls it
  first thing; a no-op when already tuned, when the user set the tunable themselves, or off
  glibc).

Not the app's own process: it wants latency, not throughput. A huge page is zeroed (and may be
compacted for) in the thread that first touches it, under the GIL the GUI thread then waits for:
gui_bench's after-open stall at 100k nodes was 41-102 ms tuned, 5-43 ms not (two runs each,
interleaved). `onnxport gui` starts the app untuned; its heavy children start tuned.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

TUNABLE = "glibc.malloc.hugetlb"
SETTING = f"{TUNABLE}=1"


def is_tuned(env: Mapping[str, str]) -> bool:
    """Whether `env` already sets the tunable (ours, or the user's own value, which stands)."""
    return any(part.split("=", 1)[0] == TUNABLE for part in env.get("GLIBC_TUNABLES", "").split(":"))


def tuned_environ(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with the tunable added to GLIBC_TUNABLES."""
    env = dict(os.environ if env is None else env)
    if not is_tuned(env):
        env["GLIBC_TUNABLES"] = ":".join(p for p in (env.get("GLIBC_TUNABLES", ""), SETTING) if p)
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
