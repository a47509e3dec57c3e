"""`--providers cpu,openvino` and `--provider-option openvino:precision=FP16`, on validate and bench.

Parsed before any work: an unknown provider name or a malformed option is one line, exit 2.
`--provider-option NAME:KEY=VALUE` (repeatable) gives one provider option (as ONNX Runtime's
`provider_options`), e.g. OpenVINO's `device_type` and `precision`; options go to the report.
Light: the parser imports nothing heavy (core/runtimes/names.py).
"""

from __future__ import annotations

import argparse

from onnxport.core.util.errors import OnnxportError


def add_provider_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--providers", metavar="LIST",
                        help="also run on these execution providers, each against CPU: cpu, openvino, cuda, "
                             "tensorrt, dml, qnn, coreml or ORT's full names, comma-separated "
                             "(`onnxport runtimes` lists what is installed)")
    parser.add_argument("--provider-option", action="append", default=[], metavar="NAME:KEY=VALUE",
                        help="an option of provider NAME (e.g. openvino:precision=FP16); repeatable")


def parsed_providers(args: argparse.Namespace) -> tuple[list[str], dict[str, dict]] | None:
    """(providers by full name, CPU first; options per provider), or None without --providers."""
    from onnxport.core.runtimes.names import full_name, provider_names

    if not args.providers:
        if args.provider_option:
            raise OnnxportError("--provider-option needs --providers")
        return None
    providers = provider_names(args.providers)
    options: dict[str, dict] = {}
    for item in args.provider_option:
        name, colon, rest = item.partition(":")
        key, equals, value = rest.partition("=")
        if not (colon and equals and key.strip()):
            raise OnnxportError(f"--provider-option expects NAME:KEY=VALUE (e.g. openvino:precision=FP16), got '{item}'")
        provider = full_name(name)
        if provider not in providers:
            raise OnnxportError(f"--provider-option names {name}, which --providers does not list")
        options.setdefault(provider, {})[key.strip()] = value.strip()
    return providers, options


def run_providers(args: argparse.Namespace, model, on: tuple[list[str], dict], progress, *, inputs=None,
                  target: float | None = None, seconds: float = 1.0):
    """The model run on the providers of `on` against CPU (core/runtimes/run_on.py), on `inputs`
    (else generated, sized by the command's --dim/--shape); `target`: the cosine each output must
    reach (default 0.999)."""
    from onnxport.core.cli.input_options import input_sizes
    from onnxport.core.cli.interrupts import call_token
    from onnxport.core.evaluate.compare import Thresholds
    from onnxport.core.runtimes.run_on import run_on_providers

    providers, options = on
    thresholds = Thresholds(min_cosine=target) if target is not None else None
    return run_on_providers(model, providers, options=options, inputs=inputs,
                            thresholds=thresholds, seconds=seconds, progress=progress, cancel=call_token(),
                            **input_sizes(args))
