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
