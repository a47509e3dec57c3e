"""Names close to a misspelt one, and the one wording every front end shows for them.

`close_names(name, candidates)`: up to `limit` candidates like `name` (difflib's ratio >= 0.5,
else those containing it, case-insensitively). `did_you_mean(name, candidates)`: "did you mean
'a', 'b'?", or "" when none is close. Errors put it in their message itself (not only in a hint),
so the Python API's exception text and the CLI's line say the same thing.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def close_names(name: str, candidates: Iterable[str], limit: int = 3) -> list[str]:
    """See the module docstring."""
    pool = sorted(set(candidates))
    close = difflib.get_close_matches(name, pool, n=limit, cutoff=0.5)
    if not close:
        low = name.lower()
        close = [c for c in pool if low in c.lower()][:limit]
    return close


def did_you_mean(name: str, candidates: Iterable[str], limit: int = 3) -> str:
    """See the module docstring."""
    close = close_names(name, candidates, limit)
    return f"did you mean {', '.join(repr(c) for c in close)}?" if close else ""
