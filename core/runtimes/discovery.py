"""Where the ONNX Runtime builds are: this environment's, and one environment per other build.

The builds that bring other execution providers (onnxruntime-openvino, -gpu, -directml, -qnn)
each install the `onnxruntime` package, so none shares onnxport's environment. Found, in order:
1. this environment (its onnxruntime: the CPU reference);
2. the make targets' environments beside it: `.venv-openvino`, `.venv-gpu`, `.venv-directml`,
   `.venv-qnn` (`make runtime-openvino`...), next to the environment onnxport runs in;
3. the Pythons named by `ONNXPORT_RUNTIMES` (paths separated by ':').
Each is described by a child in it (probe.py `describe`, through the one child protocol): its
ONNX Runtime version, package and providers; one that cannot answer is listed with the reason.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from onnxport.core.runtimes.names import CPU, ENV_VARIABLE, how_to_get, short_name
from onnxport.core.util.child_call import Child
from onnxport.core.util.errors import OnnxportError

FOLDERS = (".venv-openvino", ".venv-gpu", ".venv-directml", ".venv-qnn")
PROBE = "onnxport.core.runtimes.probe"
DESCRIBE_TIMEOUT_S = 120.0  # importing a GPU build's onnxruntime loads its libraries


@dataclass
class Runtime:
    """One ONNX Runtime build: the Python that runs it and what it says of itself."""

    python: str
    source: str  # "this environment" | "make target" | ENV_VARIABLE
    ort_version: str | None = None
    package: str | None = None
    providers: list[str] = field(default_factory=list)
    python_version: str | None = None
    cpu_flags: list[str] = field(default_factory=list)
    error: str | None = None  # why it could not be described

    @property
    def own(self) -> bool:
        return self.source == "this environment"

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        if self.error:
            return f"{self.python} ({self.source}): unusable: {self.error}"
        names = ", ".join(short_name(p) for p in self.providers)
        return (f"{self.python} ({self.source}): {self.package or 'onnxruntime'} {self.ort_version} "
                f"on Python {self.python_version}: {names}")


def candidates() -> list[tuple[str, str]]:
    """(python, source) of every environment looked at, this one first, each once."""
    found = [(sys.executable, "this environment")]
    here = Path(sys.prefix)
    for base in (here.parent, here):
        for folder in FOLDERS:
            python = base / folder / "bin" / "python"
            if python.is_file() and os.access(python, os.X_OK):
                found.append((str(python), "make target"))
    for entry in os.environ.get(ENV_VARIABLE, "").split(os.pathsep):
        if entry.strip():
            found.append((os.path.abspath(entry.strip()), ENV_VARIABLE))
    seen, unique = set(), []
    for python, source in found:
        key = os.path.realpath(python) if source != "this environment" else python
        if key not in seen and python not in seen:
            seen.update({key, python})
            unique.append((python, source))
    return unique


def describe(python: str, source: str) -> Runtime:
    """The runtime of `python`, described by a child in it (this environment's in this process)."""
    if source == "this environment":
        from onnxport.core.runtimes import probe

        return Runtime(source=source, **probe.describe(None, b"", None))
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return Runtime(python, source, error="no such Python")
    try:
        with Child(python, label=f"the runtime at {python}") as child:
            answer = child.call(f"{PROBE}:describe", timeout=DESCRIBE_TIMEOUT_S)
    except OnnxportError as exc:
        return Runtime(python, source, error=exc.one_line())
    return Runtime(source=source, **answer)


def find_runtimes() -> list[Runtime]:
    """Every runtime found (see the module docstring), this environment's first."""
    return [describe(python, source) for python, source in candidates()]


def runtime_for(provider: str, runtimes: list[Runtime]) -> Runtime:
    """The runtime that runs `provider`: this environment's for CPU, else the first that lists it;
    `OnnxportError` (one line: how to install it) when none does."""
    if provider == CPU:
        return runtimes[0]
    for runtime in runtimes:
        if not runtime.own and provider in runtime.providers:
            return runtime
    looked = ", ".join(r.python for r in runtimes[1:]) or "none besides this one"
    raise OnnxportError(f"{short_name(provider)} ({provider}) is not installed (environments looked at: "
                        f"{looked}): {how_to_get(provider)}")
