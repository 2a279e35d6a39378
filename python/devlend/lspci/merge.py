"""Several imported hosts as one cluster (``devlend import-merge``): each file is a description of
one host (``devlend import-lspci``'s output, or any topology with one host), merged with NTB links
added so every host reaches every other.

* Names: each host's switches, devices and adapters get the host's name in front
  (``server1-gpu-04-00``), so captures of identical machines do not clash; host names must differ.
* NTB links: a full mesh, as Device Lending's adapters are cabled without a switch: for each pair
  of hosts one adapter of profile ``ntb`` in each (``ntb-server1-server2`` in server1), each in a
  root port of its own added to its host (at most 31 per host), the two cabled together. The slot
  and cable links run at the adapter's ``max_gen``/``max_width`` from params/hardware.toml.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from ..errors import TopologyError
from ..topology import from_dict
from .common import _NAME_RE

MAX_ROOT_PORTS = 31


def _rename(desc: dict, host: str) -> dict:
    """The description with its components' names prefixed by the host's."""
    d = copy.deepcopy(desc)
    names = {c["name"]: f"{host}-{c['name']}" for key in ("switches", "devices", "ntbs") for c in d.get(key, [])}
    for key in ("switches", "devices", "ntbs"):
        for c in d.get(key, []):
            c["name"] = names[c["name"]]

    def end(ref: str) -> str:
        base, dot, port = ref.partition(".")
        return names.get(base, base) + dot + port
    for link in d.get("links", []):
        link["a"], link["b"] = end(link["a"]), end(link["b"])
    return d


def _adapter(ntb: str) -> tuple[int, int]:
    from .assemble import _params
    p = _params().get("ntb", {})
    if p and ntb not in p:
        raise TopologyError(f"unknown NTB adapter profile '{ntb}': expected one of {', '.join(p)}", field="ntb")
    prof = p.get(ntb, {})
    return int(prof.get("max_gen", 3)), int(prof.get("max_width", 8))


def merge(descriptions: list[tuple[str, dict]], *, name: str = "cluster", ntb: str = "pxh830") -> dict:
    """One cluster from (file, description) pairs of one host each, with a full mesh of NTB links."""
    if len(descriptions) < 2:
        raise TopologyError("need at least two imported hosts to merge")
    if not _NAME_RE.match(name):
        raise TopologyError(f"cluster name {name!r}: expected a letter followed by letters, digits, '-' or '_'", field="name")
    gen, width = _adapter(ntb)
    out: dict[str, Any] = {"name": name, "description": "Merged from imported hosts: " + ", ".join(f for f, _ in descriptions),
                           "hosts": [], "switches": [], "devices": [], "ntbs": [], "links": []}
    seen: dict[str, str] = {}
    for file, desc in descriptions:
        hosts = desc.get("hosts") if isinstance(desc, dict) else None
        if not isinstance(hosts, list) or len(hosts) != 1:
            raise TopologyError(f"expected the description of one host, found {len(hosts) if isinstance(hosts, list) else 'no'} hosts",
                                file=file, field="hosts")
        host = hosts[0]["name"]
        if host in seen:
            raise TopologyError(f"host {host} is also in {seen[host]}: import each machine with its own --host name",
                                file=file, field="hosts[0].name")
        seen[host] = file
        d = _rename(desc, host)
        for key in ("hosts", "switches", "devices", "ntbs", "links"):
            out[key].extend(d.get(key, []))
    hosts = out["hosts"]
    for i, a in enumerate(hosts):
        for b in hosts[i + 1:]:
            for h, peer in ((a, b), (b, a)):
                if h["root_ports"] >= MAX_ROOT_PORTS:
                    raise TopologyError(f"host {h['name']} has {h['root_ports']} root ports: no room for an NTB adapter "
                                        f"to {peer['name']} (devlend models at most {MAX_ROOT_PORTS})", file=seen[h["name"]])
                adapter = f"ntb-{h['name']}-{peer['name']}"
                out["ntbs"].append({"name": adapter, "profile": ntb})
                out["links"].append({"a": f"{h['name']}.rp{h['root_ports']}", "b": adapter, "gen": gen, "width": width})
                h["root_ports"] += 1
            out["links"].append({"a": f"ntb-{a['name']}-{b['name']}.cable", "b": f"ntb-{b['name']}-{a['name']}.cable",
                                 "gen": gen, "width": width, "kind": "cable"})
    merged = {k: v for k, v in out.items() if v != []}
    from_dict(merged)  # the schema's checks, before anything is written
    return merged


def _as_written(file: str, topo) -> dict:
    """`file`'s description as its author wrote it (sizes such as ``64 GiB`` stay so), checked by
    `topo`, its validated model; each host's root port count made explicit for the adapters."""
    import yaml

    with open(file, encoding="utf-8") as fh:
        raw = yaml.safe_load(fh)
    for h, model in zip(raw.get("hosts") or [], topo.hosts):
        h.setdefault("root_ports", model.root_ports)
    return raw


def main_merge(files: list[str], name: str, ntb: str, output: Optional[str]) -> str:
    """The CLI's entry point: read, merge, check that it builds, return (and write) the YAML."""
    import yaml

    from ..topology import load
    descs = []
    for f in files:
        descs.append((f, _as_written(f, load(f))))
    merged = merge(descs, name=name, ntb=ntb)
    from_dict(merged).build()
    header = "".join(f"# {line}\n" for line in [f"devlend import-merge of {', '.join(files)}",
                                                 f"NTB links added: a full mesh of {ntb} adapters (ntb-HOST-PEER in HOST)"])
    from . import write_output
    return write_output(header + yaml.safe_dump(merged, sort_keys=False), output)
