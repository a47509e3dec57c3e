"""The lock of the versions the tests passed with (requirements/lock.txt), for the Makefile.

    python scripts/lock.py write requirements/lock.txt   # `make lock`: freeze this environment
    python scripts/lock.py stale requirements/lock.txt   # installed, unlocked, in a locked folder
    .venv-openvino/bin/python scripts/lock.py write requirements/runtime-openvino.txt  # a runtime's

`write` records every distribution installed in the running environment except onnxport itself,
pip/setuptools/wheel and the real-model packages (tests/real/models.txt pins those), torch without
its local label (`2.13.0+cpu` -> `2.13.0`: the Makefile installs the local CPU wheel first).
`stale` names what the lock does not list but that writes into a folder a locked distribution owns
(PySide6 6.12's split-out PySide6_WebEngine writes PySide6/Qt/lib, which 6.11's PySide6_Addons
holds): `make install` removes those before installing from the lock, so an old wheel's files
never shadow the locked one's. Anything else installed by hand stays.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "tests" / "real" / "models.txt"
NEVER_LOCKED = {"onnxport", "pip", "setuptools", "wheel"}
HEADER = """\
# The versions `make test` passed with: .venv installs with these as pip constraints (-c).
# Refresh with `make lock` after `make test-latest` passes on newer releases.
# PySide6 6.12.0 loses a reference to True per Signal.emit() on CPython 3.11 (the app aborts):
# 6.11.3 here; tests/gui/test_refcount_guard.py checks whichever is installed.
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pinned(path: Path) -> dict[str, str]:
    """name -> version of each `name==version` line (comments and blanks skipped)."""
    pins = {}
    for line in path.read_text().splitlines():
        found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)", line)
        if found:
            pins[canonical(found.group(1))] = found.group(2)
    return pins


def _installed() -> dict[str, metadata.Distribution]:
    return {canonical(d.metadata["Name"]): d for d in metadata.distributions()}


def write(lock: Path) -> None:
    skip = NEVER_LOCKED | set(_pinned(MODELS))
    lines = []
    for name, dist in sorted(_installed().items()):
        if name in skip:
            continue
        version = dist.version.split("+")[0] if name == "torch" else dist.version
        lines.append(f"{dist.metadata['Name']}=={version}")
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(_header(lock) + "\n".join(lines) + "\n")


def _header(lock: Path) -> str:
    """The lock's header: .venv's, or a runtime environment's (requirements/runtime-NAME.txt)."""
    if not lock.stem.startswith("runtime-"):
        return HEADER
    name = lock.stem.removeprefix("runtime-")
    return (f"# The versions of .venv-{name} (`make runtime-{name}` installs exactly these; core/runtimes/).\n"
            f"# Refresh: .venv-{name}/bin/python scripts/lock.py write {lock.parent.name}/{lock.name}\n")


def _folders(dist: metadata.Distribution) -> set[str]:
    return {f.parts[0] for f in dist.files or () if len(f.parts) > 1 and not f.parts[0].endswith(".dist-info")
            and f.parts[0] not in ("..", "bin", "__pycache__")}


def stale(lock: Path) -> list[str]:
    locked = _pinned(lock)
    installed = _installed()
    known = set(locked) | set(_pinned(MODELS)) | NEVER_LOCKED
    owned = set().union(*(_folders(installed[n]) for n in locked if n in installed))
    return sorted(installed[n].metadata["Name"] for n in installed if n not in known and _folders(installed[n]) & owned)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("write", "stale"):
        print("usage: lock.py write|stale LOCK", file=sys.stderr)
        return 2
    if argv[0] == "write":
        write(Path(argv[1]))
    else:
        print("\n".join(stale(Path(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
