"""The README's figures, produced by the commands that make them: each figure the README quotes
from a run sits in a block between ``<!-- generated: NAME ... -->`` and ``<!-- end generated:
NAME -->`` lines, and this module rewrites (``--write``) or checks (``--check``, the default) each
block from a fresh run. ``scripts/readme-figures`` runs it; tests/test_docs.py checks every block
but the ones that need a Linux guest (``GUEST_BLOCKS``), which tests/test_linux_guest.py checks
from the guest run it makes anyway.

    python -m devlend.readme_figures            # exit 1 and a diff when a block is stale
    python -m devlend.readme_figures --write    # regenerate the blocks in README.md

Each block's opening line names the command whose output it is, so a reader knows which run
every number comes from.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import subprocess
import sys
from typing import Callable

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def _cli(*args: str) -> str:
    """What `devlend ARGS` prints when piped (no terminal, no COLUMNS: 100 columns)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run([sys.executable, "-m", "devlend.cli", *args], capture_output=True, text=True, check=True,
                          env=env, cwd=os.path.dirname(README)).stdout


def hops() -> str:
    """`devlend experiment hops`'s table (its notes left out)."""
    shown = [line for line in _cli("experiment", "hops").splitlines() if not line.startswith("  note:")]
    return "```\n" + "\n".join(shown).rstrip() + "\n```\n"


@functools.cache
def _validate_doc() -> dict:
    """`devlend validate --format json`, run once per process."""
    import json
    return json.loads(_cli("validate", "--format", "json", "-q"))


def _bench(host: str, quantity: str, sizes) -> list[dict]:
    """The pcie-bench verdicts of hosts whose name contains `host`, for `quantity` at `sizes`."""
    out = []
    for v in _validate_doc()["verdicts"]:
        head, _, size = v["id"].rpartition("-")
        if v["id"].startswith("pcie-bench-") and host in head and head.endswith(quantity) and int(size) in sizes:
            out.append(v)
    return out


def calibration_gaps() -> str:
    """What the model does not reach on the pcie-bench corpus, from `devlend validate`'s verdicts."""
    def pct(vs):
        errs = [float(v["rel_error"].rstrip("%")) for v in vs]
        return f"{min(errs):+.0f}% to {max(errs):+.0f}%"

    def worst(vs):
        v = max(vs, key=lambda v: abs(float(v["rel_error"].rstrip("%"))))
        size = int(v["id"].rpartition("-")[2])
        return f"{float(v['ours']):.1f} Gb/s against {float(v['theirs']):.1f} measured at {size} B"
    mrrs512 = [v for h in ("-snb-e5-", "-ib-e5-", "-hsw-e5-2637") for v in _bench(h, "dma_read_bw", (512, 1536, 2048))]
    bdw = _bench("-bdw-e5-", "dma_read_bw", range(320, 1 << 20))
    e5w = _bench("-e5-", "dma_write_bw", (192,))
    e3w = _bench("-e3-", "dma_write_bw", range(64, 1 << 20))
    rows = [("Xeon E5 hosts of MRRS 512, DMA reads of 512 B, 1536 B and 2 KiB", pct(mrrs512), worst(mrrs512)),
            ("Broadwell Xeon E5 host (MRRS 4096), DMA reads of 320 B and more", pct(bdw), worst(bdw)),
            ("Xeon E5 hosts, DMA writes of 192 B", pct(e5w), worst(e5w)),
            ("Xeon E3 host (calibration), DMA writes of 64 B and more", pct(e3w), worst(e3w))]
    lines = ["| where | model against measured | worst |", "| --- | --- | --- |"]
    return "\n".join(lines + [f"| {a} | {b} | {c} |" for a, b, c in rows]) + "\n"


def validate() -> str:
    """`devlend validate`'s summary lines and its per source and quantity table of the validation set."""
    doc = _validate_doc()
    rows = [r for r in doc["breakdown"] if r["set"] == "validation"]
    table = ["| source | quantity | n | within | median |error| | p90 |error| |", "|---|---|---|---|---|---|"]
    table += [f"| {r['source']} | {r['quantity']} | {r['n']} | {r['within']} | {_short(r['median |error|'])} | "
              f"{_short(r['p90 |error|'])} |" for r in rows]
    return ("```\n" + "\n".join(doc["summary"]) + "\n```\n\nPer source and quantity, validation set (calibration hosts "
            "excluded):\n\n" + "\n".join(table) + "\n")


@functools.cache
def quick_result(name: str):
    """`devlend experiment NAME --quick`'s result, run in this process once per process (the
    script and a test session each run an experiment at most once, whatever the blocks and tests
    that read it; readers must not change it)."""
    from . import experiments
    return experiments.get(name).run(quick=True)


def _rows(name: str) -> list[dict]:
    return [dict(r) for r in quick_result(name).rows]


def _by(name: str, *keys: str) -> dict:
    """`name`'s numeric rows keyed by the values of `keys` (the paper rows left out)."""
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in _rows(name)
            if all(not isinstance(r.get(k), str) or r[k] not in ("paper", "—") for k in keys)}


def _f(v: float, nd: int = 2) -> str:
    return f"{v:.{nd}f}"


def paper_figures() -> list[tuple[str, str, str, str]]:
    """(experiment, figure, the paper's value, ours) for the experiments that reproduce a paper
    figure; the paper's value is a quote, ours comes from the run."""
    d1 = _by("d1", "scenario", "size")
    d3 = {r["scenario"]: r for r in _rows("d3")}
    d5 = {r["scenario"]: r for r in _rows("d5")}
    r1 = [r for r in _rows("r1") if isinstance(r["size"], int)]
    r2 = _by("r2", "size")
    x1, x2, x3, x4 = ({r[k]: r for r in _rows(n)} for n, k in (("x1", "size"), ("x2", "size"), ("x3", "size"), ("x4", "pages")))
    h1 = _by("h1", "config", "connections")
    h2 = _by("h2", "workload", "order", "config", "tenants")
    h3 = [r for r in _rows("h3") if isinstance(r["tenants"], int)]
    h4 = _by("h4", "workload", "variant", "tenants")
    M = 1 << 20
    crossover = next(r["size"] for r in r1 if r["faster"] != "memcpy")
    xen = [r for k, r in x3.items() if k != "paper"]
    reg = [r for k, r in x4.items() if k != "paper"]
    lfu = max(a["gbps"] / b["gbps"] for a in h3 for b in h3 if a["variant"] == "b: LFU" and b["variant"] == "b: LRU"
              and (a["workload"], a["tenants"]) == (b["workload"], b["tenants"]))
    base = [r["gbps"] for k, r in h2.items() if k[2] == "base" and k[3] > 32]
    ht = {o: h2["iperf3", o, "hypertrio", 1024]["utilisation"] for o in ("RR1", "RR4", "RAND1")}
    pf = [h4[w, "c: PTB 32 + prefetching", 1024] for w in ("iperf3", "mediastream", "websearch")]
    gain = max(p["gbps"] / h4[p["workload"], "b: PTB 32", 1024]["gbps"] - 1 for p in pf)
    return [
        ("d1", "Rem-SW / Loc reads at 4 MiB", "a little under 6 GB/s",
         f"{_f(d1['Rem-SW', 4 * M]['read_GBps'])} / {_f(d1['Loc', 4 * M]['read_GBps'])} GB/s"),
        ("d1", "Rem-IOMMU over Rem-SW at 4 MiB, reads / writes", "reduced, especially for reads",
         f"{_f(d1['Rem-IOMMU', 4 * M]['read_GBps'] / d1['Rem-SW', 4 * M]['read_GBps'])} / "
         f"{_f(d1['Rem-IOMMU', 4 * M]['write_GBps'] / d1['Rem-SW', 4 * M]['write_GBps'])}"),
        ("d3", "RAM-to-RAM one way", "~700 ns", f"{d3['RAM-to-RAM one-way, borrower to lender B']['devlend_one_way_ns']:.0f} ns"),
        ("d3", "second lender adds (2L-P2P-SW minus 1L-P2P-SW round trip)", "a little over 700 ns",
         f"{d3['2L-P2P-SW']['round_trip_ns'] - d3['1L-P2P-SW']['round_trip_ns']:.0f} ns"),
        ("d5", "the borrower adds (NatRem minus NatLoc, 8 x 512 B)", "a little under 1 µs",
         f"{d5['NatRem - NatLoc latency']['devlend_added_ns'] / 1000:.2f} µs"),
        ("d5", "VM minus borrower", "slightly more", f"{d5['VMRem - NatRem latency']['devlend_added_ns'] / 1000:.2f} µs"),
        ("d5", "RAM-to-RAM one way", "550-580 ns", f"{d5['RAM-to-RAM one-way']['devlend_added_ns']:.0f} ns"),
        ("r1", "memcpy / block DMA at 1 MiB", "~150 / ~500 MB/s",
         f"{r1[-1]['memcpy_MBps']:.0f} / {r1[-1]['block_MBps']:.0f} MB/s"),
        ("r1", "smallest size where block DMA is faster", "memcpy faster below 2 KB", f"{crossover // 1024} KiB"),
        ("r2", "SG8 over block DMA at 1 MiB", "slightly above (up to ~520 MB/s)",
         f"{(r2[M]['sg8_MBps'] / r2[M]['block_MBps'] - 1) * 100:+.1f}%"),
        ("h1", "64-entry 8-way DevTLB: 4 / 5 / 8 / 64 connections", "full bandwidth up to 4; more thrash",
         " / ".join(f"{h1['64-entry 8-way', c]['gbps']:.0f}" for c in (4, 5, 8, 64)) + " Gb/s"),
        ("h2", "Base beyond 32 tenants", "12-30 Gb/s", _span(base, "Gb/s", 0)),
        ("h2", "HyperTRIO at 1024 tenants, RR1 / RR4 / RAND1 (utilisation)", ">90% (RAND1 up to 80%)",
         " / ".join(f"{ht[o] * 100:.0f}%" for o in ("RR1", "RR4", "RAND1"))),
        ("h3", "active sets iperf3 / mediastream / websearch", "8 / 32 / 36",
         " / ".join(r["gbps"].split(" / ")[0] for r in _rows("h3") if "ours" in str(r["variant"]))),
        ("h3", "LFU over LRU, best case", "up to 2x", f"{lfu:.2f}x"),
        ("h4", "PTB 32 at 1024 tenants, iperf3", "136 Gb/s", f"{h4['iperf3', 'b: PTB 32', 1024]['gbps']:.0f} Gb/s"),
        ("h4", "prefetching: most gain / most coverage at 1024", "up to 30% / 45%",
         f"{gain * 100:.0f}% / {max(p['prefetch_coverage'] for p in pf) * 100:.0f}%"),
        ("x1", "basic split at 128 KB / native at 256 KB", "770 / ~830 MB/s",
         f"{x1['128K']['MBps Xen-IB-basic']:.0f} / {x1['256K']['MBps gen2-native']:.0f} MB/s"),
        ("x2", "bypass: 1 B round trip / 256 KB bandwidth", "7.8 µs / 830 MB/s",
         f"{x2['1']['rtt_us rdma Xen-IB-bypass']:.2f} µs / {x2['256K']['MBps rdma Xen-IB-bypass']:.0f} MB/s"),
        ("x3", "Xen adds to blocking verbs (IDD, bypass)", "2-10 µs",
         _span([r[k] for r in xen for k in ("Xen adds (us), IDD", "Xen adds (us), bypass")], "µs", 0)),
        ("x4", "registration: device domain over native", "25-35%", _span([r["IDD over native %"] for r in reg], "%", 0)),
    ]


def beyond_figures() -> list[tuple[str, str, str, str]]:
    """(experiment, figure, "—", ours) for the experiments beyond the papers."""
    d2 = {(r["scenario"], r["size"]): r["GBps"] for r in _rows("d2")}
    fio = _rows("fio")
    one = {r["placement"]: r for r in fio if (r["rw"], r["numjobs"], r["iodepth"]) == ("randread", 1, 1)}
    peak = {(rw, pl): max(r["kIOPS"] for r in fio if (r["rw"], r["placement"]) == (rw, pl))
            for rw in ("randread", "randwrite") for pl in ("local", "borrowed")}
    con = {(r["scenario"], r["access"], r["N"]): r for r in _rows("contention")}
    iommu_reads = [con[k]["total_GBps"] for k in con if k[:2] == ("Rem-IOMMU", "read")]
    hnic = _by("hnic", "config", "nic", "tenants")
    together = {r["workload"]: r for r in _rows("compose") if (r["case"], r["config"]) == ("together", "hypertrio")}
    return [
        ("d2", "2L-RAM-SW at 4 MiB", "a little under 6 GB/s (001)", f"{d2['2L-RAM-SW', 4 << 20]:.2f} GB/s"),
        ("d2", "Loc-P2P-SW / 1L-P2P-SW / 2L-P2P-SW at 4 MiB", "—",
         " / ".join(f"{d2[s, 4 << 20]:.2f}" for s in ("Loc-P2P-SW", "1L-P2P-SW", "2L-P2P-SW")) + " GB/s"),
        ("fio", "4 KiB random reads, QD1, local / borrowed", "—",
         f"{one['local']['kIOPS']:.1f}k / {one['borrowed']['kIOPS']:.1f}k IOPS "
         f"(borrowed +{one['borrowed']['lat_mean_us'] - one['local']['lat_mean_us']:.1f} us)"),
        ("fio", "random reads, most IOPS of any depth and jobs, local / borrowed", "—",
         f"{peak['randread', 'local']:.0f}k / {peak['randread', 'borrowed']:.0f}k IOPS"),
        ("fio", "random writes, most IOPS, local / borrowed", "—",
         f"{peak['randwrite', 'local']:.0f}k / {peak['randwrite', 'borrowed']:.0f}k IOPS"),
        ("contention", "one stream through the lender's NTB, IOMMU off: writes / reads", "—",
         f"{con['Rem-SW', 'write', 1]['per_stream_GBps']:.2f} / {con['Rem-SW', 'read', 1]['per_stream_GBps']:.2f} GB/s"),
        ("contention", "8 streams, IOMMU off: each writes / reads", "—",
         f"{con['Rem-SW', 'write', 8]['per_stream_GBps']:.2f} / {con['Rem-SW', 'read', 8]['per_stream_GBps']:.2f} GB/s"),
        ("contention", "reads through the lender's IOMMU, 1-8 streams, total", "—", _span(iommu_reads, "GB/s")),
        ("hnic", "a translation's round trip, local / lent", "—",
         f"{hnic['base', 'local', 4]['round_trip_ns']:.0f} / {hnic['base', 'lent', 4]['round_trip_ns']:.0f} ns"),
        ("hnic", "HyperTRIO at 1024 tenants, local / lent", "—",
         f"{hnic['hypertrio', 'local', 1024]['gbps']:.0f} / {hnic['hypertrio', 'lent', 1024]['gbps']:.0f} Gb/s"),
        ("compose", "together over alone, HyperTRIO on: fio / GPU / NIC", "—",
         " / ".join(f"{together[w]['vs_alone']:.2f}" for w in ("fio", "gpu", "nic"))),
        ("compose", "the shared bottleneck together, and its utilisation", "—",
         f"`{together['gpu']['bottleneck']}` {together['gpu']['utilisation']:.2f}"),
    ]


def _figure_table(rows: list[tuple[str, str, str, str]]) -> str:
    lines = ["| experiment | figure | paper | ours | run |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| `{e}` | {what} | {paper} | {value} | `devlend experiment {e} --quick` |" for e, what, paper, value in rows]
    return "\n".join(lines) + "\n"


def experiment_figures() -> str:
    """The figures the experiments table refers to, from each experiment's --quick run."""
    return _figure_table(paper_figures() + beyond_figures())


def _span(values: list, unit: str, nd: int = 2) -> str:
    lo, hi = f"{min(values):.{nd}f}", f"{max(values):.{nd}f}"
    return f"{lo} {unit} in all" if lo == hi else f"{lo}-{hi} {unit}"


def _short(pct: str) -> str:
    return pct or "-"


# name -> (how the block is made, the command it comes from)
BLOCKS: dict[str, tuple[Callable[[], str], str]] = {
    "hops": (hops, "devlend experiment hops"),
    "validate": (validate, "devlend validate --format json"),
    "calibration-gaps": (calibration_gaps, "devlend validate --format json"),
    "experiment-figures": (experiment_figures, "devlend experiment NAME --quick, each run once"),
}


# The side-by-side run behind the README's linux-fio figures: the one tests/test_linux_guest.py makes.
LINUX_FIO_IOS, LINUX_FIO_JOBS = 32, [("randread", 1)]


def linux_fio_block(rows: list[dict]) -> str:
    """The README's linux-fio figures from `linux_fio.measure(LINUX_FIO_IOS, jobs=LINUX_FIO_JOBS)`'s rows."""
    from .experiments import linux_fio
    # No IOPS: fio reports a 32-I/O job's runtime in whole milliseconds, so the guest's IOPS of so
    # short a run say nothing (the experiment's 512 I/Os are needed for them).
    table = [(r["placement"], r["side"], _f(r["lat_mean_us"]), _f(r["lat_p99_us"])) for r in rows]
    lines = ["| placement | side | clat mean µs | clat p99 µs |", "| --- | --- | ---: | ---: |"]
    lines += [f"| {' | '.join(t)} |" for t in table]
    diff = {side: linux_fio.borrowed_minus_local(rows, side) for side in ("linux guest", "devlend model")}
    by = {(r["placement"], r["side"]): r["lat_mean_us"] for r in rows}
    gap = by["local", "devlend model"] - by["local", "linux guest"]
    lines += ["", f"Borrowed minus local: {diff['linux guest']:+.2f} µs in the guest, {diff['devlend model']:+.2f} µs on "
                  f"the model; the model's local mean is {gap:+.2f} µs from the guest's (it charges the CPU's "
                  f"interrupt entry, the guest's time has no CPU model)."]
    return "\n".join(lines) + "\n"


def linux_fio() -> str:
    from .experiments import linux_fio as lf
    return linux_fio_block(lf.measure(LINUX_FIO_IOS, jobs=LINUX_FIO_JOBS))


# Blocks that need a Linux guest (`devlend linux build`): checked by tests/test_linux_guest.py.
GUEST_BLOCKS: dict[str, tuple[Callable[[], str], str]] = {
    "linux-fio": (linux_fio, "devlend.experiments.linux_fio.measure(32, jobs=[('randread', 1)])"),
}
KNOWN = {**BLOCKS, **GUEST_BLOCKS}

_BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+)[^\n]*-->\n)(?P<body>.*?)(<!-- end generated: (?P=name) -->)", re.S)


def blocks(text: str) -> dict[str, str]:
    """The generated blocks of `text`, by name."""
    return {m["name"]: m["body"] for m in _BLOCK.finditer(text)}


def regenerate(text: str, only: "list[str] | None" = None) -> str:
    """`text` with every (or each `only`) block made afresh; an unknown block name is an error."""
    def fresh(m: re.Match) -> str:
        name = m["name"]
        if name not in KNOWN:
            raise KeyError(f"README block {name!r}: no generator (known: {', '.join(KNOWN)})")
        if only is not None and name not in only:
            return m.group(0)
        make, command = KNOWN[name]
        return f"<!-- generated: {name} by scripts/readme-figures from `{command}` -->\n{make()}<!-- end generated: {name} -->"
    return _BLOCK.sub(fresh, text)


def main(argv: "list[str] | None" = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="readme-figures", description="regenerate or check the README's generated figures")
    ap.add_argument("--write", action="store_true", help="rewrite README.md's blocks (default: check them)")
    ap.add_argument("--only", action="append", help="only this block (repeatable)")
    ap.add_argument("--readme", default=README)
    a = ap.parse_args(argv)
    with open(a.readme, encoding="utf-8") as fh:
        text = fh.read()
    new = regenerate(text, a.only)
    if a.write:
        with open(a.readme, "w", encoding="utf-8") as fh:
            fh.write(new)
        return 0
    if new != text:
        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), "README.md", "regenerated"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
