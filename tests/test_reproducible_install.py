"""The lock of the versions the tests passed with (issue 26 item 7): every dependency pyproject names
is pinned in requirements/lock.txt within pyproject's range, the PySide6 pinned does not lose
references (gui/test_refcount_guard.py), .venv installs within the lock and reinstalls when it
changes, and `scripts/lock.py write` records an environment the way the lock is written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    found = (re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line) for line in path.read_text().splitlines())
    return {_canonical(m.group(1)): m.group(2) for m in found if m}


def test_every_dependency_is_locked_within_pyproject_s_range():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"]]
    wanted += [Requirement(r) for extra in ("torch", "test") for r in project["optional-dependencies"][extra]]
    pins = _pins(LOCK)
    environment = default_environment()
    for requirement in wanted:
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        name = _canonical(requirement.name)
        assert name in pins, f"{requirement.name} is not in {LOCK.name}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (str(requirement), pins[name])
    assert pins["pyside6"] != "6.12.0" and pins["pyside6-addons"] == pins["pyside6"] == pins["shiboken6"]
    assert pins["torch"] == "2.13.0"  # the local CPU wheel, without its +cpu label


def test_venv_installs_within_the_lock_and_again_when_it_changes():
    makefile = (ROOT / "Makefile").read_text()
    stamp_rule = next(line for line in makefile.splitlines() if line.startswith("$(STAMP):"))
    assert "$(LOCK)" in stamp_rule.split(":", 1)[1]
    assert re.search(r'pip install -q -c \$\(LOCK\) -e "\.\[torch,test\]"', makefile)
    assert "test-latest:" in makefile and "lock:" in makefile


def test_lock_write_records_the_environment_as_the_lock_is_written(tmp_path):
    out = tmp_path / "lock.txt"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "lock.py"), "write", str(out)], check=True, timeout=600)
    pins = _pins(out)
    assert "onnxport" not in pins and "pip" not in pins
    assert not set(pins) & set(_pins(ROOT / "tests" / "real" / "models.txt"))  # pinned there
    assert "+" not in pins.get("torch", "")
    assert {"numpy", "onnx", "onnxruntime", "pyside6"} <= set(pins)
