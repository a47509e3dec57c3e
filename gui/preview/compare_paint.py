"""What the compare view paints and lists, from a comparison's dict (core/compare, `to_dict()`).

`graph_payload(report, side)` is overlay_script's payload for graph "a" or "b": matched nodes on
the error overlay's own scale (error_overlay.colour_for: the relative L2 error a node adds over
its inputs, the same honest scale), the first divergence with a thick border, and, in colours
outside that scale, nodes only in this graph (added in B, removed from A) and nodes whose
attributes or inputs changed. `difference_rows(report)` and `parameter_rows(report)` are the
table's rows: (kind, name, op or shape, detail, figure, node to show, graph side); figures sort as
numbers. Nodes inside If/Loop bodies (`If_0/then_branch/...`) are listed, not painted.
"""

from __future__ import annotations

from .error_overlay import HIGH, LOW, colour_for, text_colour

ADDED, REMOVED, CHANGED = "#1e88e5", "#616161", "#00acc1"
MEASURABLE = 5e-5  # added error below this is not painted (as the error overlay)


def _fig(value) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _entry(fill: str, title: str, jump: bool = False) -> dict:
    return {"fill": fill, "text": text_colour(fill), "title": title, "jump": jump}


def graph_payload(report: dict, side: str) -> dict:
    s = report.get("structure") or {}
    numeric = report.get("numeric") or {}
    key = "node" if side == "a" else "node_b"
    nodes: dict[str, dict] = {}
    for n in numeric.get("nodes", []):
        name = n.get(key) or n["node"]
        if n.get("nonfinite") or n.get("departs") or (n.get("added") or 0.0) >= MEASURABLE:
            nodes[name] = _entry(colour_for(n.get("added"), bool(n.get("nonfinite"))),
                                 f"{name} ({n['op']})\nadds {_fig(n.get('added'))} relative error over its inputs\n"
                                 f"its output: relative L2 {_fig(n.get('rel_l2'))}")
    first = numeric.get("first_divergence")
    jump = (first or {}).get(key) or (first or {}).get("node")
    if jump in nodes:
        nodes[jump] = dict(nodes[jump], jump=True, title=nodes[jump]["title"] + "\nthe first divergence")
    for c in s.get("nodes_changed", []):
        name = c.get("name_b", c["name"]) if side == "b" else c["name"]
        note = "changed: " + "; ".join(c["changes"][:4])
        if name in nodes:
            nodes[name] = dict(nodes[name], title=nodes[name]["title"] + "\n" + note)
        else:
            nodes[name] = _entry(CHANGED, f"{name} ({c['op']})\n{note}")
    only = s.get("nodes_added" if side == "b" else "nodes_removed", [])
    for n in only:
        nodes[n["name"]] = _entry(ADDED if side == "b" else REMOVED,
                                  f"{n['name']} ({n['op']})\n" + ("only in B (added)" if side == "b" else
                                                                  "only in A (removed)"))
    return {"nodes": {k: v for k, v in nodes.items()}, "legend": _legend(report, side, jump)}


def _legend(report: dict, side: str, jump: str | None) -> dict:
    numeric = report.get("numeric")
    lines = [{"text": "{count} nodes painted; unpainted: matched, no measurable difference"}]
    if numeric is not None:
        lines.append({"text": f"first divergence: {jump}" if jump else "no divergence beyond tolerance"})
    lines.append({"text": "added (only in B)" if side == "b" else "removed (only in A)",
                  "swatch": ADDED if side == "b" else REMOVED})
    lines.append({"text": "attributes or inputs changed", "swatch": CHANGED})
    return {"title": "Error each node adds (relative L2)",
            "gradient": [colour_for(10 ** (LOW + (HIGH - LOW) * k / 6)) for k in range(7)],
            "ticks": ["≤0.0001", "0.001", "0.01", "≥0.1"], "lines": lines}


def difference_rows(report: dict) -> list[tuple]:
    """(kind, name, op, detail, figure, node, side) for every difference, the first divergence first."""
    s, numeric = report.get("structure") or {}, report.get("numeric") or {}
    rows = []
    first = numeric.get("first_divergence")
    if first:
        rows.append(("first divergence", first["node"], first["op"], f"tensor {first['name']}",
                     first.get("rel_l2"), first["node"], "a"))
    for o in numeric.get("outputs", []):
        rows.append(("output" if not o["departs"] else "output differs", o["name"], o["op"],
                     f"max abs {_fig(o.get('max_abs'))}, cosine {_fig(o.get('cosine'))}", o.get("rel_l2"),
                     o["node"], "a"))
    for t in numeric.get("tensors", []):
        if t["departs"]:
            rows.append(("tensor departs", t["name"], t["op"], f"max abs {_fig(t.get('max_abs'))}, "
                         f"cosine {_fig(t.get('cosine'))}", t.get("rel_l2"), t["node"], "a"))
    rows += [("added", n["name"], n["op"], "only in B", None, n["name"], "b") for n in s.get("nodes_added", [])]
    rows += [("removed", n["name"], n["op"], "only in A", None, n["name"], "a") for n in s.get("nodes_removed", [])]
    rows += [("changed", c["name"], c["op"], "; ".join(c["changes"]), None, c["name"], "a")
             for c in s.get("nodes_changed", [])]
    for w in s.get("initializers_changed", []):
        rows.append(("weight changed", w["name"], w["kind"], f"max abs {_fig(w.get('max_abs'))}, "
                     f"cosine {_fig(w.get('cosine'))}", w.get("rel_l2"), "", "a"))
    rows += [("weight added", w["name"], w["kind"], f"{w['dtype']}{w['shape']}", None, "", "b")
             for w in s.get("initializers_added", [])]
    rows += [("weight removed", w["name"], w["kind"], f"{w['dtype']}{w['shape']}", None, "", "a")
             for w in s.get("initializers_removed", [])]
    return rows


def parameter_rows(report: dict) -> list[tuple]:
    """(status, name, shape, dtype, max abs, rel L2, cosine) per parameter, as the core sorted them."""
    rows = []
    for p in report.get("parameters", []):
        shape = str(p["shape"]) if p.get("shape_b", p["shape"]) == p["shape"] else f"{p['shape']} vs {p['shape_b']}"
        rows.append((p["status"], p["name"], shape, p.get("dtype") or p.get("dtype_b") or "", p.get("max_abs"),
                     p.get("rel_l2"), p.get("cosine")))
    return rows
