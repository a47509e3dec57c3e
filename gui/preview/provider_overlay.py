"""The graph painted by execution provider: which nodes a provider took and which fell back to CPU.

`provider_payload(report)` builds, from a report with `providers` (core/runtimes/report.py) and the
file's node names the app's run attached (`providers_run.node_names`), the payload the error
overlay paints (overlay_script.py `apply`): the nodes ONNX Runtime placed on CPU in orange, the
others in the provider's blue, each with a hover title, and a legend with the counts. The first
provider other than CPU is painted; {} nodes when there is none or it failed.
"""

from __future__ import annotations

from onnxport.core.runtimes.names import CPU, short_name

ON_PROVIDER = "#2f6fb5"
ON_CPU = "#e8702a"


def provider_payload(report: dict | None) -> dict:
    entry = next((p for p in (report or {}).get("providers") or [] if p.get("provider") != CPU), None)
    names = ((report or {}).get("providers_run") or {}).get("node_names") or []
    if entry is None or entry.get("error") or not names:
        return {"nodes": {}, "legend": None}
    name, on_cpu = short_name(entry["provider"]), set(entry.get("cpu_nodes") or [])
    took = {"fill": ON_PROVIDER, "text": "#ffffff",
            "title": f"{entry['provider']}: not among the nodes ONNX Runtime placed on CPU"}
    fell = {"fill": ON_CPU, "text": "#000000",
            "title": f"fell back to CPU: {entry['provider']} did not take it"}
    nodes = {n: dict(fell if n in on_cpu else took, title=f"{n}\n{(fell if n in on_cpu else took)['title']}")
             for n in names}
    legend = {"title": f"Where ONNX Runtime placed the nodes: {name}",
              "gradient": [f"{ON_PROVIDER} 50%", f"{ON_CPU} 50%"], "ticks": [name, "CPU (fell back)"],
              "lines": [{"text": f"{entry['nodes_on_provider']} of {entry.get('nodes_partitioned', '?')} nodes on {name}, "
                                 f"{entry['nodes_on_cpu']} fell back to CPU", "swatch": ON_CPU},
                        {"text": "{count} nodes painted"}]}
    return {"nodes": nodes, "legend": legend}
