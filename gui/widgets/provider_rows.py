"""The Report tab's rows for a run on execution providers (core/runtimes/report.py's `providers`).

`provider_rows(report)`: per provider one HTML row (escaped: names come from the model's file and
from ONNX Runtime): the nodes it took and those that fell back to CPU, what it computes in, each
output's cosine and max abs diff against CPU, p50 and load time with the latency against CPU's
(interval included), or why it could not run.
"""

from __future__ import annotations

import html

from onnxport.core.runtimes.names import CPU


def provider_rows(report: dict) -> list[str]:
    rows: list[str] = []
    for p in report.get("providers") or []:
        name = html.escape(f"{p.get('short_name', p['provider'])} (ONNX Runtime {p.get('ort_version') or '?'})")
        if p.get("error"):
            rows.append(f"✘ <b>{name}</b>: {html.escape(p['error'])}")
            continue
        mark = "✔" if p.get("passed") else "✘"
        where = (f"{p['nodes_on_provider']} nodes" if p["provider"] == CPU else
                 f"{p['nodes_on_provider']} of {p.get('nodes_partitioned', '?')} nodes, {p['nodes_on_cpu']} fell back to CPU")
        rows.append(f"{mark} <b>{name}</b>: {where} ({p.get('nodes_in_file', '?')} in the file); "
                    f"{html.escape(str(p.get('precision', '')))}")
        if p.get("options"):
            rows.append("&nbsp;&nbsp;options: " + html.escape(", ".join(f"{k}={v}" for k, v in p["options"].items())))
        for o in p.get("outputs") or []:
            cos = "n/a" if o.get("cosine") is None else f"{o['cosine']:.6f}"
            mad = "n/a" if o.get("max_abs") is None else f"{o['max_abs']:.3g}"
            rows.append(f"&nbsp;&nbsp;{'✔' if o['passed'] else '✘'} {html.escape(o['name'])}: cosine {cos}, max abs diff {mad}")
        if p.get("p50_ms") is not None:
            versus = (p.get("against_cpu") or {}).get("verdict")
            rows.append(f"&nbsp;&nbsp;p50 {p['p50_ms']:.3f} ms, load {p['load_s']:.2f} s"
                        + (f"; against CPU: {html.escape(versus)}" if versus else ""))
    return rows
