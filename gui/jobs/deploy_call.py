"""The Deploy step's core call as a job: `deploy_job(choices)` is a Qt-free `fn(progress, cancel)`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class DeployChoices:
    model: Path
    target: str
    out: Path
    shapes: list[str] = field(default_factory=list)  # "x=1x3x224x224", as --shape takes them
    dims: list[str] = field(default_factory=list)  # "batch=1", "batch=dynamic", as --dim takes them


def deploy_job(choices: DeployChoices):
    def run(progress, cancel):
        from onnxport.core.deploy.deploy import deploy
        from onnxport.core.deploy.shapes import parse_shape_options

        request = parse_shape_options(choices.shapes, choices.dims)
        return deploy(choices.model, choices.target, choices.out, request=request, progress=progress, cancel=cancel)

    return run
