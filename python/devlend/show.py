"""Human views of a fabric: an ``lspci -tv``-like tree per host, route listings, and Graphviz DOT."""

from __future__ import annotations

from typing import Any

from .sizes import fmt_size


def _rng(r: Any) -> str:
    return f"{r[0]:#x}-{r[1] - 1:#x}" if r else "-"


def _bar(b: dict) -> str:
    kind = f"{b['bits']}-bit {'prefetchable' if b['pref'] else 'non-prefetchable'}"
    return f"BAR{b['index']} {b['addr']:#x} [size={fmt_size(b['size'])}] {kind}"


def tree_lines(inv: dict) -> list[str]:
    out: list[str] = []
    for h in inv["hosts"]:
        ram = " ".join(_rng(r) for r in h["ram_regions"])
        out.append(f"host {h['name']}  cpu={h['cpu']}  RAM {fmt_size(h['ram'])} at {ram}  "
                   f"IOMMU {'on' if h['iommu'] else 'off'}  p2p-through-root {'yes' if h['p2p_through_root'] else 'no'}")
        out.append(f"  32-bit MMIO {_rng(h['mmio32'])}   64-bit MMIO {_rng(h['mmio64'])}")
        _node(h["tree"], "  ", True, out, top=True)
        out.append("")
    return out


def _node(n: dict, indent: str, last: bool, out: list[str], top: bool = False) -> None:
    branch = "" if top else ("└─ " if last else "├─ ")
    kind = n["kind"]
    if kind == "root_complex":
        label = f"[00:00.0] {n['component']} root complex"
    elif kind in ("root_port", "switch_up", "switch_down"):
        what = {"root_port": "root port", "switch_up": "switch upstream port", "switch_down": "switch downstream port"}[kind]
        label = (f"[{n['bdf']}] {n['component']}.{n['port']} {what}  bus {n['secondary']:02x}-{n['subordinate']:02x}"
                 f"  mem {_rng(n['mem'])}  pref {_rng(n['pref'])}")
    else:
        desc = n.get("device_kind", "ntb") if kind == "endpoint" else "ntb adapter"
        prof = n.get("profile")
        label = f"{n['component']} ({desc}{', ' + prof if prof else ''})"
        peers = n.get("peers", [])
        if kind == "ntb" and len(peers) > 1:
            label += "  peers " + ", ".join(f"{p['ntb']} in {p['host']}" + (f" via {p['via']}" if p.get("via") else "") for p in peers)
        elif kind == "ntb":
            label += f"  cable to {n['peer']} in {n['peer_host']}" if n.get("peer") else "  cable unconnected"
    if n.get("link"):
        l = n["link"]
        label += f"  [Gen{l['gen']} x{l['width']} {l['kind']}]"
    out.append(indent + branch + label)
    child_indent = indent + ("" if top else ("   " if last else "│  "))
    detail = child_indent + ("│  " if n["children"] else "   ")
    for f in n.get("functions", []):
        vf = f" VF{f['vf']}" if f.get("vf") is not None else ""
        out.append(f"{detail}{f['bdf']} {f['name']}{vf}")
        for b in f["bars"]:
            out.append(f"{detail}   {_bar(b)}")
    for w in n.get("windows", []):
        seg = f", {w['lut_segments']} LUT segments" if w["lut_segments"] else ""
        out.append(f"{detail}   window {w['index']} = BAR{w['bar']} {w['addr']:#x} [size={fmt_size(w['size'])}{seg}] -> {'its peers' if len(n.get('peers', [])) > 1 else n.get('peer') or 'nowhere'}")
    tables = [(p["ntb"], p["inbound"]) for p in n.get("peers", [])] or [(n.get("peer"), n.get("inbound", []))]
    for peer, inbound in tables:
        for i, t in enumerate(inbound):
            if t is None:
                continue
            if "segments" in t:
                used = [s for s in t["segments"] if s is not None]
                desc = f"{len(used)} of {len(t['segments'])} segments programmed" + (f", first at {used[0]:#x}" if used else "")
            else:
                desc = f"{t['addr']:#x} [size={fmt_size(t['size'])}]"
            out.append(f"{detail}   inbound window {i} from {peer} lands at {desc}")
    kids = n["children"]
    for i, c in enumerate(kids):
        _node(c, child_indent, i == len(kids) - 1, out)


def route_text(route: Any) -> str:
    lines = []

    def emit(r: Any, title: str) -> None:
        lines.append(title)
        n = 0
        for h in r.hops:
            if h.counts:
                n += 1
            num = f"{n:>3}" if h.counts else "   "
            lines.append(f"  {num}  {h.kind:<8} {h.component + '.' + h.port:<22} {h.host:<12} addr {h.addr:#018x}  rid {h.rid}")
        if r.delivered:
            t = r.target
            where = {"ram": lambda: f"RAM of {t['host']} at {t['addr']:#x}",
                     "bar": lambda: f"{t['function']} BAR{t['bar']} offset {t['offset']:#x} (host {t['host']})",
                     "msi": lambda: f"MSI write to {t['addr']:#x} in {t['host']}",
                     "cpu": lambda: f"CPU of {t['host']}",
                     "function": lambda: f"{t['function']}"}[t["kind"]]()
            lines.append(f"  => delivered to {where}; {r.hop_count} hops, {r.roots} root complex(es), {r.ntb_crossings} NTB crossing(s)")
        else:
            lines.append(f"  => FAILED: {r.failure['message']}")

    emit(route, f"{route.access} request")
    if route.completion is not None:
        emit(route.completion, "completion")
    return "\n".join(lines)


def to_dot(inv: dict, cluster_switches: list = (), vms: list = ()) -> str:
    """Graphviz DOT: one cluster per host, switches and endpoints as nodes, links as edges; NTB
    cluster switches as nodes of their own, and each VM beside its host with an edge to each of
    its devices (VFIO pass-through or the mediated lending path)."""
    def q(s: str) -> str:
        return '"' + s.replace('"', r'\"') + '"'

    lines = ["digraph devlend {", "  rankdir=TB; compound=true;", '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8, arrowhead=none];']
    comp_host: dict[str, str] = {}
    for h in inv["hosts"]:
        lines.append(f"  subgraph {q('cluster_' + h['name'])} {{")
        lines.append(f"    label={q(h['name'] + ' (' + h['cpu'] + (', IOMMU' if h['iommu'] else '') + ')')}; style=rounded;")
        lines.append(f"    {q(h['name'])} [shape=box3d, label={q(h['name'] + ' root complex')}];")

        def walk(n: dict) -> None:
            c = n["component"]
            if c not in comp_host:
                comp_host[c] = h["name"]
                if n["kind"] == "switch_up":
                    lines.append(f"    {q(c)} [shape=box, style=filled, fillcolor=lightgray];")
                elif n["kind"] == "endpoint":
                    lines.append(f"    {q(c)} [shape=ellipse, label={q(c + chr(10) + n.get('device_kind', ''))}];")
                elif n["kind"] == "ntb":
                    lines.append(f"    {q(c)} [shape=hexagon, style=filled, fillcolor=lightyellow, label={q(c + chr(10) + 'NTB')}];")
            for ch in n["children"]:
                walk(ch)
        walk(h["tree"])
        lines.append("  }")
    for sw in cluster_switches:
        lines.append(f"  {q(sw.name)} [shape=box3d, style=filled, fillcolor=lightblue, "
                     f"label={q(sw.name + chr(10) + 'NTB cluster switch' + (' (' + sw.profile + ')' if sw.profile else ''))}];")
    for vm in vms:
        lines.append(f"  {q('vm:' + vm.name)} [shape=component, style=filled, fillcolor=honeydew, label={q(vm.name + chr(10) + 'VM on ' + vm.host)}];")
        lines.append(f"  {q('vm:' + vm.name)} -> {q(vm.host)} [style=dotted, label=\"runs on\"];")
        for d in vm.devices:
            path = d.path or ("vfio" if comp_host.get(d.device) == vm.host else "mediated")
            lines.append(f"  {q('vm:' + vm.name)} -> {q(d.device)} [style=dotted, color=darkgreen, label={q(path)}];")
    for l in inv["links"]:
        up = l["up_component"]
        style = ", style=dashed, color=blue, penwidth=2" if l["ntb"] else (", style=bold" if l["kind"] == "cable" else "")
        label = f"Gen{l['gen']} x{l['width']}" + (" NTB" if l["ntb"] else (" cable" if l["kind"] == "cable" else ""))
        lines.append(f"  {q(up)} -> {q(l['down_component'])} [label={q(label)}{style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
