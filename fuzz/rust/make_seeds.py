"""Seed corpora for the Rust fuzz targets (fuzz/README.md), written to corpus/<target>/ beside this
file (ignored by git): small QEMU logs cut from the shipped sample log, one line of every event
kind, and small .dlt traces built from it and from the 002 §IV-D generator. Needs `pip install -e .`."""

import json
import os
import sys
import tempfile

from devlend import _core
from devlend.cli_trace import SAMPLE_LOG

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target: str, name: str, data: bytes) -> None:
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as fh:
        fh.write(data)


def main() -> int:
    with open(SAMPLE_LOG, "rb") as fh:
        log = fh.read().splitlines(keepends=True)
    put("qemu_log", "head40.log", b"".join(log[:40]))
    kinds = {}
    for line in log:  # one line of each event kind, with and without the PID@TIME: prefix
        name = line.split(b":", 1)[-1].split()[0]
        kinds.setdefault(name, line)
    for i, (name, line) in enumerate(sorted(kinds.items())):
        put("qemu_log", f"one-{i}.log", line)
        put("qemu_log", f"bare-{i}.log", line.split(b":", 1)[-1])
    put("qemu_log", "hypersio-pmask.log",
        b"vtd_iotlb_page_hit IOTLB page hit sid 0x100 iova 0xbbe00000 pmask 0xffe00000 slpte 0x40000083 domain 0x1\n")
    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "small.log")
        with open(small, "wb") as fh:
            fh.write(b"".join(log[:120]))
        for name, tenants, order in [("rr1", None, "RR1"), ("rr4-5", 5, "RR4"), ("rand-200", 200, "RAND1")]:
            out = os.path.join(tmp, f"{name}.dlt")
            json.loads(_core.hypertrio_trace_build([small], out, tenants, order, 1))
            with open(out, "rb") as fh:
                put("dlt_trace", f"{name}.dlt", fh.read())
        out = os.path.join(tmp, "synth.dlt")
        _core.hypertrio_trace_synth(out, "websearch", 3, "RR1", 4, 1)
        with open(out, "rb") as fh:
            put("dlt_trace", "synth-websearch.dlt", fh.read())
    for t in ("qemu_log", "dlt_trace"):
        d = os.path.join(HERE, "corpus", t)
        print(t, len(os.listdir(d)), "seeds,", sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)), "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
