"""Which process of a distributed job writes the export.

In a torchrun/MPI job every rank runs the same script; only rank 0 should write the inference
model (the others would race on the same file). The rank comes from the launcher's environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")


def current_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """This process's rank from the launcher's environment, or None outside a distributed job."""
    environ = os.environ if environ is None else environ
    for name in RANK_VARIABLES:
        value = environ.get(name, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                continue
    return None


def skip_reason(all_ranks: bool = False, environ: Mapping[str, str] | None = None) -> str | None:
    """Why this process should not write (a non-zero rank), or None if it should."""
    rank = current_rank(environ)
    if all_ranks or rank in (None, 0):
        return None
    return f"rank {rank}: only rank 0 writes the export (pass all_ranks=True / --all-ranks to override)"
