"""The environment onnxport's heavy children start with: glibc's malloc on huge pages, keeping big blocks.

Why: validating and quantizing allocate and free gigabytes (ONNX Runtime copies every initializer
into each session, the quantizer copies every weight); glibc serves blocks over 32 MB with fresh
`mmap`s faulted in 4 KB at a time, and unmaps them again on free. `SETTINGS` asks for 2 MB pages
(`glibc.malloc.hugetlb=1`) and keeps freed big blocks in the heap (`mmap_max=0`, no trim);
measured figures are in docs/performance.md.

Contract: `tuned_environ()` is an environment for a child process (glibc reads its tunables only at
start); a user's own value of any of these tunables stands. Nothing here changes the current
process: the app's own process and the CLI run untuned (a huge page is zeroed in the thread that
first touches it, which the GUI thread would wait for).
"""

from __future__ import annotations

import os
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
