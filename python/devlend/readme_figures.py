"""The README's figures, produced by the commands that make them: each figure the README quotes
from a run sits in a block between ``<!-- generated: NAME ... -->`` and ``<!-- end generated:
NAME -->`` lines, and this module rewrites (``--write``) or checks (``--check``, the default) each
block from a fresh run. ``scripts/readme-figures`` runs it; tests/test_docs.py checks every block.

    python -m devlend.readme_figures            # exit 1 and a diff when a block is stale
    python -m devlend.readme_figures --write    # regenerate the blocks in README.md

Each block's opening line names the command whose output it is, so a reader knows which run
every number comes from.
"""

from __future__ import annotations

import difflib
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


def validate() -> str:
    """`devlend validate`'s summary lines and its per source and quantity table of the validation set."""
    import json
    doc = json.loads(_cli("validate", "--format", "json", "-q"))
    rows = [r for r in doc["breakdown"] if r["set"] == "validation"]
    table = ["| source | quantity | n | within | median |error| | p90 |error| |", "|---|---|---|---|---|---|"]
    table += [f"| {r['source']} | {r['quantity']} | {r['n']} | {r['within']} | {_short(r['median |error|'])} | "
              f"{_short(r['p90 |error|'])} |" for r in rows]
    return ("```\n" + "\n".join(doc["summary"]) + "\n```\n\nPer source and quantity, validation set (calibration hosts "
            "excluded):\n\n" + "\n".join(table) + "\n")


def _rows(name: str) -> list[dict]:
    import json
    return json.loads(_cli("experiment", name, "--quick", "--format", "json", "-q"))["rows"]


def experiment_figures() -> str:
    """The figures the experiments table quotes for d2, fio and contention, from their --quick runs."""
    d2 = {(r["scenario"], r["size"]): r["GBps"] for r in _rows("d2")}
    fio = _rows("fio")
    one = {r["placement"]: r for r in fio if (r["rw"], r["numjobs"], r["iodepth"]) == ("randread", 1, 1)}
    peak = {(rw, pl): max(r["kIOPS"] for r in fio if (r["rw"], r["placement"]) == (rw, pl))
            for rw in ("randread", "randwrite") for pl in ("local", "borrowed")}
    con = {(r["scenario"], r["access"], r["N"]): r for r in _rows("contention")}
    iommu_reads = [con[k]["total_GBps"] for k in con if k[:2] == ("Rem-IOMMU", "read")]
    rows = [
        ("d2", "2L-RAM-SW at 4 MiB (001: a little under 6 GB/s)", f"{d2['2L-RAM-SW', 4 << 20]:.2f} GB/s"),
        ("d2", "Loc-P2P-SW / 1L-P2P-SW / 2L-P2P-SW at 4 MiB",
         " / ".join(f"{d2[s, 4 << 20]:.2f}" for s in ("Loc-P2P-SW", "1L-P2P-SW", "2L-P2P-SW")) + " GB/s"),
        ("fio", "4 KiB random reads, QD1, local / borrowed",
         f"{one['local']['kIOPS']:.1f}k / {one['borrowed']['kIOPS']:.1f}k IOPS "
         f"(borrowed +{one['borrowed']['lat_mean_us'] - one['local']['lat_mean_us']:.1f} us)"),
        ("fio", "random reads, most IOPS of any depth and jobs, local / borrowed",
         f"{peak['randread', 'local']:.0f}k / {peak['randread', 'borrowed']:.0f}k IOPS"),
        ("fio", "random writes, most IOPS, local / borrowed",
         f"{peak['randwrite', 'local']:.0f}k / {peak['randwrite', 'borrowed']:.0f}k IOPS"),
        ("contention", "one stream through the lender's NTB, IOMMU off: writes / reads",
         f"{con['Rem-SW', 'write', 1]['per_stream_GBps']:.2f} / {con['Rem-SW', 'read', 1]['per_stream_GBps']:.2f} GB/s"),
        ("contention", "8 streams, IOMMU off: each writes / reads",
         f"{con['Rem-SW', 'write', 8]['per_stream_GBps']:.2f} / {con['Rem-SW', 'read', 8]['per_stream_GBps']:.2f} GB/s"),
        ("contention", "reads through the lender's IOMMU, 1-8 streams, total",
         _span(iommu_reads, "GB/s")),
    ]
    lines = ["| experiment | figure | ours | run |", "| --- | --- | --- | --- |"]
    lines += [f"| `{e}` | {what} | {value} | `devlend experiment {e} --quick` |" for e, what, value in rows]
    return "\n".join(lines) + "\n"


def _span(values: list, unit: str) -> str:
    lo, hi = f"{min(values):.2f}", f"{max(values):.2f}"
    return f"{lo} {unit} in all" if lo == hi else f"{lo}-{hi} {unit}"


def _short(pct: str) -> str:
    return pct or "-"


# name -> (how the block is made, the command it comes from)
BLOCKS: dict[str, tuple[Callable[[], str], str]] = {
    "hops": (hops, "devlend experiment hops"),
    "validate": (validate, "devlend validate --format json"),
    "experiment-figures": (experiment_figures, "devlend experiment d2|fio|contention --quick --format json"),
}

_BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+)[^\n]*-->\n)(?P<body>.*?)(<!-- end generated: (?P=name) -->)", re.S)


def blocks(text: str) -> dict[str, str]:
    """The generated blocks of `text`, by name."""
    return {m["name"]: m["body"] for m in _BLOCK.finditer(text)}


def regenerate(text: str, only: "list[str] | None" = None) -> str:
    """`text` with every (or each `only`) block made afresh; an unknown block name is an error."""
    def fresh(m: re.Match) -> str:
        name = m["name"]
        if name not in BLOCKS:
            raise KeyError(f"README block {name!r}: no generator (known: {', '.join(BLOCKS)})")
        if only is not None and name not in only:
            return m.group(0)
        make, command = BLOCKS[name]
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
